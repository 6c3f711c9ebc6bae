#pragma once
// Which tokens survive under H2O, for one (layer, KV head): the entries it
// holds (text index, slot, accumulated attention) in text order, and the
// cut back after each query (docs/H2O.md): keep the S sinks and the R most
// recent tokens; among the rest keep the H with the most accumulated
// attention (the lowest goes first; ties: the older). Slots come from the
// lane's own free list, lowest first, so a lane never uses a slot index at
// or above its peak number of entries. Pure bookkeeping: no KV data.
#include <cstdint>
#include <queue>
#include <span>
#include <vector>

#include "kv/policy.h"

namespace ss {

struct H2oEntry {
  int64_t text;
  int32_t slot;
  double score;
};

class H2oLane {
 public:
  explicit H2oLane(int n_slots);

  // Appends the token at text index `text` (greater than every held one)
  // with score 0; returns its slot, or -1 when all slots are taken.
  int32_t append(int64_t text);
  // Entries with text index <= query, in text order: what `query` attends to.
  std::span<const H2oEntry> visible(int64_t query) const;
  // Adds attention mass to the entry at `index` of visible().
  void add_score(size_t index, double mass) { entries_[index].score += mass; }
  // After `query` attended: evicts as the policy says among entries with
  // text index <= query, freeing their slots. Returns how many left.
  int cut_back(const KvPolicy& p, int64_t query);

  const std::vector<H2oEntry>& entries() const { return entries_; }

 private:
  std::vector<H2oEntry> entries_;  // text order
  std::priority_queue<int32_t, std::vector<int32_t>, std::greater<>> free_;
};

}  // namespace ss
