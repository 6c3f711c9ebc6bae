#include "kv/h2o_lane.h"

#include <algorithm>

#include "util/check.h"

namespace ss {

H2oLane::H2oLane(int n_slots) {
  SS_CHECK(n_slots > 0);
  for (int32_t s = 0; s < n_slots; ++s) free_.push(s);
}

int32_t H2oLane::append(int64_t text) {
  SS_CHECK_MSG(entries_.empty() || entries_.back().text < text, "H2O entries are appended in text order");
  if (free_.empty()) return -1;
  const int32_t s = free_.top();
  free_.pop();
  entries_.push_back({text, s, 0.0});
  return s;
}

std::span<const H2oEntry> H2oLane::visible(int64_t query) const {
  const auto end = std::upper_bound(entries_.begin(), entries_.end(), query,
                                    [](int64_t q, const H2oEntry& e) { return q < e.text; });
  return {entries_.data(), static_cast<size_t>(end - entries_.begin())};
}

int H2oLane::cut_back(const KvPolicy& p, int64_t query) {
  // Candidates: held, not a sink, not among the R most recent of `query`.
  const int64_t recent0 = query - p.window + 1;
  int evicted = 0;
  for (;;) {
    int64_t candidates = 0;
    size_t worst = entries_.size();
    for (size_t i = 0; i < entries_.size() && entries_[i].text < recent0; ++i) {
      if (entries_[i].text < p.sinks) continue;
      ++candidates;
      // Strictly lower wins, so among equal scores the oldest stays the choice.
      if (worst == entries_.size() || entries_[i].score < entries_[worst].score) worst = i;
    }
    if (candidates <= p.heavy) return evicted;
    free_.push(entries_[worst].slot);
    entries_.erase(entries_.begin() + static_cast<std::ptrdiff_t>(worst));
    ++evicted;
  }
}

}  // namespace ss
