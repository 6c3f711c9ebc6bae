#include "kv/block_pool.h"

#include <gtest/gtest.h>

#include <set>

namespace ss {
namespace {

BlockPool make_pool(int n) { return BlockPool(BlockPoolConfig{n, 4, 2, 3}); }

TEST(BlockPool, AllocatesUntilExhaustedThenReturnsNothing) {
  auto pool = make_pool(3);
  std::set<BlockId> got;
  for (int i = 0; i < 3; ++i) {
    auto b = pool.allocate();
    ASSERT_TRUE(b.has_value());
    got.insert(*b);
  }
  EXPECT_EQ(got.size(), 3u);
  EXPECT_EQ(pool.free_blocks(), 0);
  EXPECT_FALSE(pool.allocate().has_value());
  pool.release(*got.begin());
  EXPECT_EQ(pool.free_blocks(), 1);
  EXPECT_EQ(pool.allocate(), *got.begin());
}

TEST(BlockPool, RefcountKeepsSharedBlocksAlive) {
  auto pool = make_pool(2);
  const BlockId b = *pool.allocate();
  pool.retain(b);
  EXPECT_EQ(pool.refcount(b), 2);
  pool.release(b);
  EXPECT_EQ(pool.used_blocks(), 1);
  pool.release(b);
  EXPECT_EQ(pool.used_blocks(), 0);
}

TEST(BlockPool, BlocksAndLayersDoNotOverlap) {
  auto pool = make_pool(2);
  const BlockId a = *pool.allocate(), b = *pool.allocate();
  std::set<const float*> starts;
  for (BlockId id : {a, b})
    for (int l = 0; l < 2; ++l) {
      starts.insert(pool.k(id, l));
      starts.insert(pool.v(id, l));
      EXPECT_EQ(pool.v(id, l) - pool.k(id, l), 4 * 3);
    }
  EXPECT_EQ(starts.size(), 8u);
}

}  // namespace
}  // namespace ss
