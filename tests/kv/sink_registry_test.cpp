// The sink registry alone, over a bare block pool (no model): keys, the
// reference it holds, and that prune() returns the pool to its baseline
// exactly when no sequence uses an entry any more.
#include "kv/sink_registry.h"

#include <gtest/gtest.h>

#include "kv/sequence_kv.h"

namespace ss {
namespace {

BlockPool small_pool() { return BlockPool({.n_blocks = 32, .block_tokens = 4, .n_layers = 1, .kv_dim = 2}); }

TEST(SinkRegistry, KeyIsPolicyAndFirstTokens) {
  BlockPool pool = small_pool();
  SinkRegistry reg;
  const std::vector<int32_t> first = {1, 2, 3, 4};
  const auto b = pool.allocate();
  ASSERT_TRUE(b);
  EXPECT_TRUE(reg.add(pool, "sinks:4:8", first, {*b}));
  EXPECT_FALSE(reg.add(pool, "sinks:4:8", first, {*b}));  // first registration wins
  EXPECT_NE(reg.find("sinks:4:8", first), nullptr);
  EXPECT_EQ(reg.find("sinks:4:16", first), nullptr);  // another policy: other KV
  const std::vector<int32_t> other = {1, 2, 3, 5};
  EXPECT_EQ(reg.find("sinks:4:8", other), nullptr);
  EXPECT_EQ(pool.refcount(*b), 2);
  EXPECT_EQ(reg.blocks(), 1);
}

TEST(SinkRegistry, PruneReleasesOnlyEntriesNobodyUses) {
  BlockPool pool = small_pool();
  const int baseline = pool.used_blocks();
  SinkRegistry reg;
  const KvPolicy p = KvPolicy::sinks_window(4, 8);
  const std::vector<int32_t> first = {7, 7, 7, 7};
  {
    SequenceKv owner(pool, p, 4);
    ASSERT_TRUE(owner.reserve(4).ok());
    owner.advance(4);
    ASSERT_TRUE(reg.add(pool, p.name(), first, owner.sink_blocks()));
    SequenceKv adopter(pool, p, 4);
    ASSERT_TRUE(adopter.adopt_sinks(*reg.find(p.name(), first)).ok());
    EXPECT_EQ(reg.prune(pool), 0);  // both sequences still hold the blocks
  }
  EXPECT_GT(pool.used_blocks(), baseline);  // only the registry holds them now
  EXPECT_EQ(reg.prune(pool), 1);
  EXPECT_EQ(reg.entries(), 0u);
  EXPECT_EQ(pool.used_blocks(), baseline);
}

TEST(SinkRegistry, ClearGivesEverythingBack) {
  BlockPool pool = small_pool();
  SinkRegistry reg;
  for (int32_t k = 0; k < 5; ++k) {
    const auto b = pool.allocate();
    ASSERT_TRUE(b);
    const std::vector<int32_t> key = {k};
    reg.add(pool, "p", key, {*b});
    pool.release(*b);  // the "sequence" is gone; the registry's reference remains
  }
  EXPECT_EQ(pool.used_blocks(), 5);
  reg.clear(pool);
  EXPECT_EQ(pool.used_blocks(), 0);
}

}  // namespace
}  // namespace ss
