#include "kv/block_pool.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <set>
#include <utility>
#include <vector>

#include "format/ggml_types.h"
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

// Rows written through store() come back through load() and load_raw() /
// store_raw() unchanged, and sit where the attention kernels' view says:
// K dimension-major, V token-major or (v_dim_major) dimension-major; for
// every float type, in a second block and layer.
TEST(BlockPool, RowsRoundTripInEitherVLayout) {
  for (GgmlType type : {GgmlType::F32, GgmlType::F16, GgmlType::BF16})
    for (bool v_dm : {false, true}) {
      constexpr int kTokens = 4, kDim = 6;
      BlockPoolConfig cfg{2, kTokens, 2, kDim, type};
      cfg.v_dim_major = v_dm;
      BlockPool pool(cfg);
      ASSERT_EQ(pool.v_dim_major(), v_dm);
      const BlockId id = *pool.allocate(), other = *pool.allocate();
      // Values exact in every type: small integers.
      auto value = [](int t, int d, bool is_v) { return static_cast<float>((is_v ? 100 : 0) + 10 * t + d); };
      for (int t = 0; t < kTokens; ++t) {
        float k[kDim], v[kDim];
        for (int d = 0; d < kDim; ++d) {
          k[d] = value(t, d, false);
          v[d] = value(t, d, true);
        }
        pool.store(id, 1, t, k, v);
      }
      const size_t es = type == GgmlType::F32 ? 4 : 2;
      for (int t = 0; t < kTokens; ++t) {
        float k[kDim], v[kDim];
        pool.load(id, 1, t, k, v);
        for (int d = 0; d < kDim; ++d) {
          EXPECT_EQ(k[d], value(t, d, false));
          EXPECT_EQ(v[d], value(t, d, true));
        }
        // Where the kernels read them: element d of token t of head 1 (elements 3-5).
        const KvHeadView view = pool.head_view(id, 1, 3);
        EXPECT_EQ(view.v_dim_major, v_dm);
        std::vector<float> kh(3 * 1), vh(3);
        kv_decode_head(view, t, 1, 3, kh.data(), vh.data());
        for (int d = 0; d < 3; ++d) {
          EXPECT_EQ(kh[d], value(t, 3 + d, false));
          EXPECT_EQ(vh[d], value(t, 3 + d, true));
        }
        const auto* v0 = static_cast<const uint8_t*>(view.v);
        const size_t at = v_dm ? (static_cast<size_t>(kDim - 1) * kTokens + t) * es
                               : static_cast<size_t>(t) * pool.row_bytes() + (kDim - 1) * es;
        float last;
        dequantize_row(type, v0 + at, &last, 1);
        EXPECT_EQ(last, value(t, kDim - 1, true)) << "v_dm " << v_dm;
        // Raw rows move to another block and layer intact.
        std::vector<uint8_t> kr(pool.row_bytes()), vr(pool.row_bytes());
        pool.load_raw(id, 1, t, kr.data(), vr.data());
        pool.store_raw(other, 0, kTokens - 1 - t, kr.data(), vr.data());
        pool.load(other, 0, kTokens - 1 - t, k, v);
        for (int d = 0; d < kDim; ++d) {
          EXPECT_EQ(k[d], value(t, d, false));
          EXPECT_EQ(v[d], value(t, d, true));
        }
      }
    }
}

}  // namespace
}  // namespace ss
