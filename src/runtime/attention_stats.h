#pragma once
// Collects where attention goes: per layer and head, the share each query
// puts on the first k text tokens (the would-be sinks) against the share a
// uniform distribution over the same keys would give, and for one chosen
// layer/head the full map query x cache position.
#include <cstdint>
#include <vector>

#include "runtime/engine.h"

namespace ss {

struct HeadShare {
  double first_k_share = 0;  // mean over queries of sum(probs on text index < k)
  double uniform_share = 0;  // mean over queries of min(k, visible)/visible
  int64_t queries = 0;
  double max_sum_error = 0;  // max |sum(probs) - 1| seen
  double ratio() const { return uniform_share > 0 ? first_k_share / uniform_share : 0; }
};

class AttentionStats : public AttentionObserver {
 public:
  AttentionStats(int n_layers, int n_heads, int64_t first_k, int map_layer, int map_head, int64_t map_queries);
  void on_attention(int layer, int head, SeqId seq, int64_t query, int64_t n_sinks, int64_t first_window_key,
                    std::span<const float> probs) override;
  // [layer][head]
  std::vector<std::vector<HeadShare>> finish() const;
  // Rows: the first map_queries queries of map_layer/map_head; columns: cache positions.
  const std::vector<std::vector<float>>& map() const { return map_; }

 private:
  int n_layers_, n_heads_;
  int64_t k_;
  int map_layer_, map_head_;
  int64_t map_queries_;
  std::vector<HeadShare> acc_;  // [layer * n_heads + head]
  std::vector<std::vector<float>> map_;
};

}  // namespace ss
