#include "kv/sequence_kv.h"

#include "kv/pool_sizing.h"
#include "util/check.h"

namespace ss {

SequenceKv::SequenceKv(BlockPool& pool, const KvPolicy& policy, int max_chunk, int h2o_lanes)
    : pool_(pool), policy_(policy), max_chunk_(max_chunk) {
  SS_CHECK(max_chunk > 0);
  const int64_t B = pool.block_tokens();
  ring_tokens_ = ring_token_count(policy_, pool.block_tokens(), max_chunk);
  if (ring_tokens_ > 0) window_blocks_.assign(static_cast<size_t>(ring_tokens_ / B), -1);
  sink_blocks_.assign(static_cast<size_t>(sink_block_count(policy_, pool.block_tokens())), -1);
  if (policy_.h2o()) {
    SS_CHECK(h2o_lanes > 0);
    lanes_.assign(static_cast<size_t>(h2o_lanes), H2oLane(static_cast<int>(ring_tokens_)));
  }
}

SequenceKv::~SequenceKv() {
  for (BlockId b : sink_blocks_)
    if (b >= 0) pool_.release(b);
  for (BlockId b : window_blocks_)
    if (b >= 0) pool_.release(b);
}

int64_t SequenceKv::cached_entries() const {
  if (!policy_.bounded()) return n_seen_;
  const int64_t cap = policy_.capacity();
  return n_seen_ < cap ? n_seen_ : cap;
}

int SequenceKv::blocks_held() const {
  int n = 0;
  for (BlockId b : sink_blocks_) n += b >= 0;
  for (BlockId b : window_blocks_) n += b >= 0;
  return n;
}

BlockId* SequenceKv::block_for(int64_t u) {
  const int64_t B = pool_.block_tokens();
  if (u < policy_.sinks) return &sink_blocks_[static_cast<size_t>(u / B)];
  int64_t r = u - policy_.sinks;
  if (ring_tokens_ > 0) r %= ring_tokens_;
  const auto idx = static_cast<size_t>(r / B);
  if (idx >= window_blocks_.size()) window_blocks_.resize(idx + 1, -1);
  return &window_blocks_[idx];
}

Status SequenceKv::reserve(int64_t n) {
  SS_CHECK(n >= 0);
  SS_CHECK_MSG(!policy_.bounded() || n <= max_chunk_, "chunk larger than the ring was sized for");
  if (policy_.h2o()) {
    // Lanes take their lowest free slot, so they use slots below their peak
    // entries: at most the held ones plus this chunk.
    const int64_t need = std::min(cached_entries() + n, ring_tokens_);
    const int64_t B = pool_.block_tokens();
    for (int64_t b = 0; b * B < need; ++b) SS_TRY(hold(window_blocks_[static_cast<size_t>(b)]));
    return ok_status();
  }
  for (int64_t u = n_seen_; u < n_seen_ + n; ++u) SS_TRY(hold(*block_for(u)));
  return ok_status();
}

Status SequenceKv::hold(BlockId& entry) {
  if (entry >= 0) return ok_status();
  auto id = pool_.allocate();
  if (!id)
    return make_error("KV cache full: no free block in the pool (" + std::to_string(pool_.total_blocks()) +
                      " blocks of " + std::to_string(pool_.block_tokens()) + " tokens)");
  entry = *id;
  return ok_status();
}

void SequenceKv::advance(int64_t n) { n_seen_ += n; }

KvSlot SequenceKv::slot_at(int32_t s) const {
  const int B = pool_.block_tokens();
  SS_CHECK(s >= 0 && s < ring_tokens_);
  const BlockId b = window_blocks_[static_cast<size_t>(s / B)];
  SS_CHECK(b >= 0);
  return {b, s % B};
}

SequenceKv::WindowPos SequenceKv::window_pos(int64_t u) const {
  SS_CHECK_MSG(!policy_.h2o(), "H2O places tokens per lane: use lane().visible() and slot_at()");
  const int64_t B = pool_.block_tokens();
  int64_t r = u - policy_.sinks;
  if (ring_tokens_ > 0) r %= ring_tokens_;
  SS_CHECK(r >= 0 && static_cast<size_t>(r / B) < window_blocks_.size());
  return {static_cast<size_t>(r / B), static_cast<int>(r % B)};
}

KvSlot SequenceKv::slot(int64_t u) const {
  SS_CHECK_MSG(!policy_.h2o(), "H2O places tokens per lane: use lane().visible() and slot_at()");
  const int64_t B = pool_.block_tokens();
  if (u < policy_.sinks) {
    const BlockId b = sink_blocks_[static_cast<size_t>(u / B)];
    SS_CHECK(b >= 0);
    return {b, static_cast<int>(u % B)};
  }
  const WindowPos w = window_pos(u);
  const BlockId b = window_blocks_[w.entry];
  SS_CHECK(b >= 0);
  return {b, w.offset};
}

}  // namespace ss

namespace ss {

std::vector<int64_t> SequenceKv::resident() const { return policy_.resident(n_seen_); }

Status SequenceKv::restore(int64_t n_seen, const std::vector<int64_t>& resident) {
  SS_CHECK(n_seen_ == 0);
  for (int64_t u : resident) {
    if (u < 0 || u >= n_seen) return make_error("restore: index outside the sequence");
    if (auto st = hold(*block_for(u)); !st.ok())
      return make_error("cannot restore the sequence: " + st.error().message);
  }
  n_seen_ = n_seen;
  return ok_status();
}

Status SequenceKv::adopt_sinks(const std::vector<BlockId>& blocks) {
  if (blocks.size() != sink_blocks_.size()) return make_error("adopt_sinks: block count mismatch");
  for (BlockId b : blocks) pool_.retain(b);
  for (BlockId& own : sink_blocks_) {
    if (own >= 0) pool_.release(own);
  }
  sink_blocks_ = blocks;
  if (n_seen_ < policy_.sinks) n_seen_ = policy_.sinks;
  return ok_status();
}

}  // namespace ss
