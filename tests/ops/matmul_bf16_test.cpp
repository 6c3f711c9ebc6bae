// Bf16 tiles (ActQuant::Fast batches): the rounding, the AMX kernel against
// its scalar twin at odd sizes, and the whole path against the exact float
// path within the error bf16 operands can cause.
#include "ops/matmul_bf16.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "ops/matmul.h"
#include "ops/matmul_int8.h"
#include "random_weights.h"
#include "util/fp16.h"

namespace ss {
namespace {

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
        for (int n : {4, 5, 16, 17, 33, 64}) {
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

// Fewer than four rows stay on the int8 kernels (other types staying exact
// under every mode: Int8Matmul.OtherTypesStayOnTheFloatPath).
TEST(Bf16Matmul, DecodeRowsKeepTheInt8Path) {
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> u(-1, 1);
  ThreadPool pool(1);
  std::vector<uint8_t> storage;
  const TensorView q = random_weights(GgmlType::Q4_0, 33, 256, rng, storage);
  for (int n : {1, 2, 3}) {
    std::vector<float> x(static_cast<size_t>(n) * 256), a(static_cast<size_t>(n) * 33), b(a.size());
    for (auto& v : x) v = u(rng);
    matmul(q, x.data(), n, a.data(), pool, ActQuant::Int8);
    matmul(q, x.data(), n, b.data(), pool, ActQuant::Fast);
    EXPECT_EQ(a, b) << "n=" << n;
  }
}

}  // namespace
}  // namespace ss
