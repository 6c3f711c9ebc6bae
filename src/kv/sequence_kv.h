#pragma once
// One sequence's block table. The first S tokens live in pinned sink blocks;
// the window is a ring of blocks (bounded policies) or a growing list (dense).
// A token's slot is a pure function of its text index, so eviction never
// copies or moves KV: a ring slot is simply overwritten once its token has
// left the window. Under H2O the table is a slot table instead: the
// sequence owns ring_token_count() slots, and each (layer, KV head) lane
// (kv/h2o_lane.h) places its tokens in them.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "kv/block_pool.h"
#include "kv/h2o_lane.h"
#include "kv/policy.h"
#include "util/check.h"
#include "util/result.h"

namespace ss {

struct KvSlot {
  BlockId block;
  int offset;  // token row within the block
};

class SequenceKv {
 public:
  // max_chunk: most tokens appended before the cache is cut back (a prefill
  // chunk); the ring holds W + max_chunk tokens so a chunk never overwrites a
  // token that one of its own queries still needs.
  // h2o_lanes: (layer, KV head) lanes an H2O policy keeps (ignored otherwise).
  SequenceKv(BlockPool& pool, const KvPolicy& policy, int max_chunk, int h2o_lanes = 0);
  ~SequenceKv();
  SequenceKv(const SequenceKv&) = delete;
  SequenceKv& operator=(const SequenceKv&) = delete;

  const KvPolicy& policy() const { return policy_; }
  int max_chunk() const { return max_chunk_; }
  int64_t n_seen() const { return n_seen_; }
  // Entries a query at the next text index would see before its own (the
  // cache's size between steps): min(n_seen, S + W) for bounded policies.
  int64_t cached_entries() const;
  int blocks_held() const;

  // Makes room for text indices [n_seen, n_seen + n). Fails (and leaves the
  // sequence usable) when the pool has no free block.
  Status reserve(int64_t n);
  void advance(int64_t n);
  KvSlot slot(int64_t text_index) const;  // position-only policies
  // H2O: lane i's bookkeeping, and where slot s of the slot table lives.
  H2oLane& lane(int i) { return lanes_[static_cast<size_t>(i)]; }
  const H2oLane& lane(int i) const { return lanes_[static_cast<size_t>(i)]; }
  KvSlot slot_at(int32_t s) const;

  // Text indices resident in the cache now (sinks, then the window, oldest first).
  std::vector<int64_t> resident() const;
  // Rebuilds an empty sequence that has seen n_seen tokens, with slots for the
  // given resident indices (contents are written by the caller).
  Status restore(int64_t n_seen, const std::vector<int64_t>& resident);
  // Sink blocks (complete once n_seen >= S), and adopting another sequence's
  // identical sink blocks read-only (reference-counted) instead of owning them.
  const std::vector<BlockId>& sink_blocks() const { return sink_blocks_; }
  Status adopt_sinks(const std::vector<BlockId>& blocks);

  // Calls fn(block, first_offset, count, first_text_index) for maximal runs
  // of consecutive text indices [begin, end) that sit contiguously in one
  // block, so readers walk KV rows without per-token lookups.
  // Window runs after the first start a block: the next entry of the table
  // (around the ring), not another slot() lookup with its divisions (decode
  // of a small model walks hundreds of runs per token).
  template <typename Fn>
  void for_each_run(int64_t begin, int64_t end, Fn&& fn) const {
    const int64_t B = pool_.block_tokens();
    while (begin < end && begin < policy_.sinks) {
      const KvSlot s = slot(begin);
      const int64_t n = std::min({B - s.offset, policy_.sinks - begin, end - begin});
      fn(s.block, s.offset, static_cast<int>(n), begin);
      begin += n;
    }
    if (begin >= end) return;
    const WindowPos first = window_pos(begin);
    size_t entry = first.entry;
    int64_t offset = first.offset;
    while (begin < end) {
      const BlockId b = window_blocks_[entry];
      SS_CHECK(b >= 0);
      const int64_t n = std::min(B - offset, end - begin);
      fn(b, static_cast<int>(offset), static_cast<int>(n), begin);
      begin += n;
      offset = 0;
      if (++entry == window_blocks_.size()) {
        SS_CHECK(ring_tokens_ > 0 || begin >= end);
        entry = 0;
      }
    }
  }

 private:
  // Where window token u sits: its entry in window_blocks_ and its offset
  // in that block (position-only policies, u >= sinks).
  struct WindowPos {
    size_t entry;
    int offset;
  };
  WindowPos window_pos(int64_t u) const;
  BlockId* block_for(int64_t text_index);
  // A block for a table entry that has none (-1); a full pool is an error.
  Status hold(BlockId& entry);

  BlockPool& pool_;
  KvPolicy policy_;
  int max_chunk_;
  int64_t n_seen_ = 0;
  int64_t ring_tokens_ = 0;  // 0: unbounded list
  std::vector<BlockId> sink_blocks_;
  std::vector<BlockId> window_blocks_;  // -1 = not yet allocated
  std::vector<H2oLane> lanes_;          // H2O only
};

}  // namespace ss
