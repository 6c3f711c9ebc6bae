#include "kv/sequence_kv.h"

#include <gtest/gtest.h>

#include <set>

#include "kv/pool_sizing.h"
#include "kv/positions.h"

namespace ss {
namespace {

BlockPool make_pool(int n, int block_tokens = 4) { return BlockPool(BlockPoolConfig{n, block_tokens, 1, 2}); }

// Appends n tokens one chunk at a time.
void stream(SequenceKv& s, int64_t n, int chunk) {
  while (n > 0) {
    const int64_t c = std::min<int64_t>(n, chunk);
    ASSERT_TRUE(s.reserve(c).ok());
    s.advance(c);
    n -= c;
  }
}

// for_each_run's runs are exactly the per-token slots, in order, split only
// where a block ends or the sinks end: over the sinks and the visible window
// of every position of a stream that wraps its ring several times.
TEST(SequenceKv, RunsAreTheSlotsSplitAtBlockAndSinkEnds) {
  for (int bt : {4, 16})
    for (const KvPolicy& p : {KvPolicy::sinks_window(4, 10), KvPolicy::sinks_window(5, 13),
                              KvPolicy::sinks_window(0, 7), KvPolicy::sliding_layer(8), KvPolicy::dense()}) {
      auto pool = make_pool(256, bt);
      SequenceKv s(pool, p, 3);
      for (int64_t pos = 0; pos < 120; ++pos) {
        stream(s, 1, 1);
        const int64_t w0 = p.first_window_key(pos);
        for (const auto& range :
             {std::pair<int64_t, int64_t>{0, std::min<int64_t>(p.sinks, pos + 1)},
              std::pair<int64_t, int64_t>{std::max(w0, std::min<int64_t>(p.sinks, pos + 1)), pos + 1}}) {
          // Plain copies: clang 14 cannot capture structured bindings.
          const int64_t begin = range.first, end = range.second;
          int64_t next = begin;
          s.for_each_run(begin, end, [&](BlockId b, int off, int count, int64_t first) {
            ASSERT_EQ(first, next) << p.name();
            ASSERT_GT(count, 0);
            for (int k = 0; k < count; ++k) {
              const KvSlot want = s.slot(first + k);
              ASSERT_EQ(want.block, b) << p.name() << " bt=" << bt << " pos=" << pos << " u=" << first + k;
              ASSERT_EQ(want.offset, off + k);
            }
            const int64_t last = first + count;
            if (last < end && last != p.sinks) {
              ASSERT_EQ(s.slot(last).offset, 0) << "run not maximal";
            }
            next = last;
          });
          ASSERT_EQ(next, std::max(begin, end));
        }
      }
    }
}

TEST(SequenceKv, RingWrapsAroundWithoutNewBlocks) {
  auto pool = make_pool(64);
  SequenceKv s(pool, KvPolicy::sinks_window(4, 10), 2);  // ring = 12 tokens = 3 blocks
  stream(s, 4 + 12, 1);
  const int held = s.blocks_held();
  EXPECT_EQ(held, 1 + 3);
  stream(s, 1000, 2);
  EXPECT_EQ(s.blocks_held(), held);  // constant memory
  EXPECT_EQ(pool.used_blocks(), held);
  // A window token's slot is reused exactly one ring later.
  const KvSlot a = s.slot(500), b = s.slot(512);
  EXPECT_EQ(a.block, b.block);
  EXPECT_EQ(a.offset, b.offset);
  EXPECT_NE(s.slot(500).block, s.slot(504).block);
}

TEST(SequenceKv, SinksStayPinnedInTheirBlock) {
  auto pool = make_pool(64);
  SequenceKv s(pool, KvPolicy::sinks_window(3, 5), 4);
  stream(s, 3, 1);
  const KvSlot first = s.slot(0);
  stream(s, 10000, 4);
  EXPECT_EQ(s.slot(0).block, first.block);
  for (int64_t u = 0; u < 3; ++u) EXPECT_EQ(s.slot(u).offset, u);
  // No window token ever lands in the sink block.
  for (int64_t u = 9990; u < 10003; ++u) EXPECT_NE(s.slot(u).block, first.block);
}

TEST(SequenceKv, ExhaustionIsAValueAndTheSequenceStaysUsable) {
  auto pool = make_pool(3);
  SequenceKv s(pool, KvPolicy::dense(), 8);
  ASSERT_TRUE(s.reserve(8).ok());
  s.advance(8);
  ASSERT_TRUE(s.reserve(4).ok());
  s.advance(4);
  auto st = s.reserve(8);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("KV cache full"), std::string::npos);
  EXPECT_EQ(s.n_seen(), 12);
  EXPECT_EQ(s.slot(11).offset, 3);
}

TEST(SequenceKv, ManySequencesShareThePoolAndFreeOnDestruction) {
  auto pool = make_pool(40);
  {
    std::vector<std::unique_ptr<SequenceKv>> seqs;
    for (int i = 0; i < 8; ++i) seqs.push_back(std::make_unique<SequenceKv>(pool, KvPolicy::sinks_window(2, 6), 2));
    for (int step = 0; step < 50; ++step)
      for (auto& s : seqs) stream(*s, 1, 1);
    std::set<std::pair<BlockId, int>> slots;
    for (auto& s : seqs)
      for (int64_t u : {0, 1, 45, 46, 47, 48, 49})
        EXPECT_TRUE(slots.insert({s->slot(u).block, s->slot(u).offset}).second);
    EXPECT_EQ(pool.used_blocks(), 8 * 3);
  }
  EXPECT_EQ(pool.used_blocks(), 0);
}

TEST(Positions, MatchStreamingDocExample) {
  // S=4, W=3, decoding text token 9: cache [0 1 2 3 | 6 7 8] + 9 at positions 0..7.
  const auto p = KvPolicy::sinks_window(4, 3);
  std::vector<int64_t> seen, pos;
  for (int64_t u = 0; u <= 9; ++u)
    if (p.visible(u, 9)) {
      seen.push_back(u);
      pos.push_back(cache_position(p, u, 9));
    }
  EXPECT_EQ(seen, (std::vector<int64_t>{0, 1, 2, 3, 6, 7, 8, 9}));
  EXPECT_EQ(pos, (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(query_cache_position(p, 9), 7);
  // Before the cache is full, positions are text positions.
  EXPECT_EQ(query_cache_position(p, 5), 5);
  // Ten million tokens in: same positions, no growth.
  EXPECT_EQ(query_cache_position(p, 10'000'000), 7);
  EXPECT_EQ(cache_position(p, 9'999'998, 10'000'000), 5);
}

}  // namespace
}  // namespace ss

namespace ss {
namespace {

// The one sizing formula is what sequences really hold at most: for bounded
// policies (incl. a sliding layer's) the peak over a long stream in uneven
// chunks, for dense the blocks of its tokens; and a pool of exactly that
// many blocks never runs out.
TEST(PoolSizing, FormulaIsWhatASequenceHolds) {
  for (int bt : {4, 16}) {
    for (int chunk : {1, 5, 16}) {
      for (const KvPolicy& p : {KvPolicy::sinks_window(4, 10), KvPolicy::sinks_window(1, 33),
                                KvPolicy::sinks_window(0, 7), KvPolicy::sliding_layer(8), KvPolicy::dense()}) {
        const int64_t tokens = 300;
        const int need = blocks_per_sequence(p, tokens, bt, chunk);
        BlockPool pool(BlockPoolConfig{need, bt, 1, 2});
        SequenceKv s(pool, p, chunk);
        for (int64_t done = 0; done < tokens;) {
          const int64_t c = std::min<int64_t>(tokens - done, 1 + (done * 7) % chunk);
          ASSERT_TRUE(s.reserve(c).ok()) << p.name() << " bt=" << bt << " chunk=" << chunk << " at " << done;
          s.advance(c);
          done += c;
        }
        EXPECT_EQ(pool.peak_used_blocks(), need) << p.name() << " bt=" << bt << " chunk=" << chunk;
      }
    }
  }
  EXPECT_EQ(KvPolicy::sliding_layer(8).window, 7);
  EXPECT_EQ(KvPolicy::sliding_layer(8).sinks, 0);
}

}  // namespace
}  // namespace ss
