#include "runtime/attention_stats.h"

#include <algorithm>
#include <cmath>

namespace ss {

AttentionStats::AttentionStats(int n_layers, int n_heads, int64_t first_k, int map_layer, int map_head,
                               int64_t map_queries)
    : n_layers_(n_layers),
      n_heads_(n_heads),
      k_(first_k),
      map_layer_(map_layer),
      map_head_(map_head),
      map_queries_(map_queries),
      acc_(static_cast<size_t>(n_layers * n_heads)) {}

void AttentionStats::on_attention(int layer, int head, SeqId, int64_t query, int64_t n_sinks, int64_t w0,
                                  std::span<const float> probs) {
  HeadShare& h = acc_[static_cast<size_t>(layer * n_heads_ + head)];
  double first = 0, sum = 0;
  int64_t visible_first = 0;
  for (size_t j = 0; j < probs.size(); ++j) {
    const int64_t u =
        static_cast<int64_t>(j) < n_sinks ? static_cast<int64_t>(j) : w0 + static_cast<int64_t>(j) - n_sinks;
    sum += probs[j];
    if (u < k_) {
      first += probs[j];
      ++visible_first;
    }
  }
  h.first_k_share += first;
  h.uniform_share += static_cast<double>(visible_first) / static_cast<double>(probs.size());
  h.max_sum_error = std::max(h.max_sum_error, std::fabs(sum - 1.0));
  ++h.queries;
  if (layer == map_layer_ && head == map_head_ && static_cast<int64_t>(map_.size()) < map_queries_)
    map_.emplace_back(probs.begin(), probs.end());  // index j is the key's cache position
  (void)query;
}

std::vector<std::vector<HeadShare>> AttentionStats::finish() const {
  std::vector<std::vector<HeadShare>> out(static_cast<size_t>(n_layers_),
                                          std::vector<HeadShare>(static_cast<size_t>(n_heads_)));
  for (int l = 0; l < n_layers_; ++l)
    for (int h = 0; h < n_heads_; ++h) {
      HeadShare s = acc_[static_cast<size_t>(l * n_heads_ + h)];
      if (s.queries > 0) {
        s.first_k_share /= static_cast<double>(s.queries);
        s.uniform_share /= static_cast<double>(s.queries);
      }
      out[static_cast<size_t>(l)][static_cast<size_t>(h)] = s;
    }
  return out;
}

}  // namespace ss
