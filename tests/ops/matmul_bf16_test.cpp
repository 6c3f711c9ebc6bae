// Bf16 tiles (ActQuant::Fast batches): the rounding, the AMX kernel against
// its scalar twin at odd sizes, and the whole path against the exact float
// path within the error bf16 operands can cause.
#include "ops/matmul_bf16.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "ops/interleave.h"
#include "ops/matmul.h"
#include "ops/matmul_int8.h"
#include "random_weights.h"
#include "util/aligned_vector.h"
#include "util/cpu_features.h"
#include "util/fp16.h"

namespace ss {
namespace {

using test::interleaved_view;
using test::random_weights;

TEST(Bf16Matmul, RoundsToNearestEven) {
  EXPECT_EQ(to_bf16(1.0f), 0x3F80);
  EXPECT_EQ(to_bf16(-2.0f), 0xC000);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties go to the even (1).
  EXPECT_EQ(to_bf16(1.0f + 0x1p-8f), 0x3F80);
  EXPECT_EQ(to_bf16(1.0f + 0x1p-7f + 0x1p-8f), 0x3F82);   // tie above an odd: up
  EXPECT_EQ(to_bf16(1.0f + 0x1p-8f + 0x1p-20f), 0x3F81);  // past the tie: up
  EXPECT_EQ(to_bf16(0x1p-130f), 0x0000);                  // subnormal: 0
  EXPECT_TRUE(std::isnan(bf16_to_fp32(to_bf16(std::numeric_limits<float>::quiet_NaN()))));
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-100, 100);
  for (int i = 0; i < 10000; ++i) {
    const float x = u(rng);
    EXPECT_LE(std::fabs(bf16_to_fp32(to_bf16(x)) - x), std::fabs(x) * 0x1p-8f) << x;  // 8 significant bits
  }
}

// The kernel against the twin (float sums in tiles vs double: within
// cols * 2^-23 of the sum of |terms|) and the exact float path (each operand
// within 2^-8 of itself, so each product within 2^-7 + 2^-16 of itself), at
// sizes that leave partial groups, single-tile strips and odd row counts,
// with one and two threads.
TEST(Bf16Matmul, KernelMatchesScalarTwinAndExactPathWithinRoundingBound) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1, 1);
  ThreadPool pool1(1), pool2(2);
  bool any = false;
  for (GgmlType t : {GgmlType::Q4_0, GgmlType::Q8_0}) {
    for (int cols : {32, 96, 320, 2048}) {
      for (int rows : {1, 5, 17, 67}) {
        std::vector<uint8_t> storage;
        const TensorView w = random_weights(t, rows, cols, rng, storage);
        if (!bf16_matmul_supported(w)) continue;
        any = true;
        for (int n : {kBf16MinRows, kBf16MinRows + 1, kBf16MinRows + 33}) {
          std::vector<float> x(static_cast<size_t>(n) * cols);
          for (auto& v : x) v = u(rng);
          std::vector<float> twin(static_cast<size_t>(n) * rows), exact(twin.size()), scale(twin.size(), 0.0f);
          matmul_bf16_reference(w, x.data(), n, twin.data());
          matmul_reference(w, x.data(), n, exact.data());
          std::vector<float> wrow(static_cast<size_t>(cols));
          for (int r = 0; r < rows; ++r) {
            dequantize_row(t, w.row(r), wrow.data(), cols);
            for (int k = 0; k < n; ++k)
              for (int i = 0; i < cols; ++i)
                scale[static_cast<size_t>(k) * rows + r] += std::fabs(wrow[i] * x[static_cast<size_t>(k) * cols + i]);
          }
          for (ThreadPool* pool : {&pool1, &pool2}) {
            std::vector<float> y(twin.size(), NAN);
            matmul(w, x.data(), n, y.data(), *pool, ActQuant::Fast);
            for (size_t o = 0; o < y.size(); ++o) {
              const float s = scale[o] * 1.01f;  // |bf16 products| <= (1 + 2^-8)^2 |products|
              ASSERT_NEAR(y[o], twin[o], static_cast<float>(cols) * 0x1p-23f * s + 1e-30f)
                  << type_name(static_cast<uint32_t>(t)) << " cols=" << cols << " rows=" << rows << " n=" << n
                  << " out=" << o;
              ASSERT_LE(std::fabs(y[o] - exact[o]), (0x1p-7f + 0x1p-16f + cols * 0x1p-22f) * s + 1e-30f)
                  << type_name(static_cast<uint32_t>(t)) << " cols=" << cols << " n=" << n << " out=" << o;
            }
          }
        }
      }
    }
  }
  if (!any) GTEST_SKIP() << "no AMX-BF16 on this CPU and cap (Fast batches take int8: Int8Matmul tests)";
}

// Fewer than kBf16MinRows rows stay on the int8 kernels (other types staying
// exact under every mode: Int8Matmul.OtherTypesStayOnTheFloatPath).
TEST(Bf16Matmul, DecodeRowsKeepTheInt8Path) {
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> u(-1, 1);
  ThreadPool pool(1);
  std::vector<uint8_t> storage;
  const TensorView q = random_weights(GgmlType::Q4_0, 33, 256, rng, storage);
  for (int n : {1, 2, 3, 4, 17, kBf16MinRows - 1}) {
    std::vector<float> x(static_cast<size_t>(n) * 256), a(static_cast<size_t>(n) * 33), b(a.size());
    for (auto& v : x) v = u(rng);
    matmul(q, x.data(), n, a.data(), pool, ActQuant::Int8);
    matmul(q, x.data(), n, b.data(), pool, ActQuant::Fast);
    EXPECT_EQ(a, b) << "n=" << n;
  }
}

// The AMX-BF16 kernel's A tiles (bf16_tile_rows) come out the same from W's
// interleaved groups as from its plain rows, bit for bit, and equal each
// dequantized weight rounded to bf16. Needs AVX-512 BF16, not the tiles, so
// machines without AMX check what the AMX ones read.
TEST(Bf16Matmul, TilesFromInterleavedGroupsEqualTilesFromPlainRows) {
  if (!cpu_usable(kCpuAvx512Bf16)) GTEST_SKIP() << "no AVX-512 BF16 on this CPU and cap";
  std::mt19937 rng(6);
  for (GgmlType type : {GgmlType::Q4_0, GgmlType::Q8_0}) {
    for (int cols : {32, 96, 800}) {
      constexpr int kRows = 48;
      std::vector<uint8_t> storage;
      const TensorView w = random_weights(type, kRows, cols, rng, storage);
      std::vector<uint8_t> copy;
      const TensorView iw = interleaved_view(w, copy);
      const int64_t nb = cols / 32;
      std::vector<float> wrow(static_cast<size_t>(cols));
      for (auto [rt, end] : {std::pair{0, kRows}, std::pair{32, kRows}, std::pair{16, 21}})
        for (auto [k0, kn] : {std::pair<int64_t, int64_t>{0, nb}, std::pair<int64_t, int64_t>{nb / 2, nb - nb / 2}}) {
          // 64-byte aligned, as the kernel's tile buffers are.
          AlignedVector<uint16_t> plain(static_cast<size_t>(kn) * 512, 1), il(plain.size(), 2);
          bf16_tile_rows(w, rt, end, k0, kn, plain.data());
          bf16_tile_rows(iw, rt, end, k0, kn, il.data());
          const std::string what = std::string(type_name(static_cast<uint32_t>(type))) +
                                   " cols=" + std::to_string(cols) + " rt=" + std::to_string(rt) +
                                   " k0=" + std::to_string(k0);
          ASSERT_EQ(il, plain) << what;
          for (int m = 0; m < 16; ++m) {
            if (rt + m < end) dequantize_row(type, w.row(rt + m), wrow.data(), cols);
            for (int64_t b = 0; b < kn; ++b)
              for (int i = 0; i < 32; ++i) {
                const uint16_t want = rt + m < end ? to_bf16(wrow[static_cast<size_t>((k0 + b) * 32 + i)]) : 0;
                ASSERT_EQ(il[static_cast<size_t>(b * 512 + m * 32 + i)], want) << what << " m=" << m;
              }
          }
        }
    }
  }
}

}  // namespace
}  // namespace ss
