#include "kv/block_pool.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <set>
#include <utility>
#include <vector>

#include "util/mapped_file.h"

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

// Pages of the pool's memory resident now, out of all of them (mincore).
std::pair<size_t, size_t> resident_pages(const BlockPool& pool) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  auto* start = static_cast<uint8_t*>(const_cast<void*>(pool.head_view(0, 0, 0).k));
  const size_t n = (pool.bytes() + page - 1) / page;
  std::vector<unsigned char> in(n);
  EXPECT_EQ(mincore(start, pool.bytes(), in.data()), 0);
  size_t resident = 0;
  for (unsigned char c : in) resident += c & 1;
  return {resident, n};
}

TEST(BlockPool, PrefaultedPoolIsResidentBeforeAnyWrite) {
  // 64 blocks x 1 layer x (K, V) x 16 tokens x 768 f32 = 6 MiB: three huge
  // pages, far under half of any working machine's free memory.
  BlockPoolConfig cfg{64, 16, 1, 768};
  const BlockPool faulted(cfg);
  ASSERT_EQ(faulted.bytes(), size_t{6} << 20);
  const auto [in_f, all_f] = resident_pages(faulted);
  EXPECT_EQ(in_f, all_f) << "free memory " << free_memory_bytes() << " bytes";
  cfg.prefault = false;
  const BlockPool lazy(cfg);
  const auto [in_l, all_l] = resident_pages(lazy);
  EXPECT_LT(in_l, all_l / 2) << "an untouched lazy pool should not be resident";
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
