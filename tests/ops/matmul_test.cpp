// matmul against its scalar (double-accumulating) reference at odd sizes for
// every weight type, on every SIMD target this CPU can run (each restricted in
// turn), single- and multi-threaded, for decode (n < 4) and batch (n >= 4)
// shapes.
#include "ops/matmul.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "ops/matmul_kernels.h"
#include "random_weights.h"

namespace ss {
namespace {

constexpr GgmlType kAllTypes[] = {GgmlType::F32,  GgmlType::F16,  GgmlType::BF16, GgmlType::Q8_0,
                                  GgmlType::Q4_0, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q4_K,
                                  GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::MXFP4};

struct RestrictTarget {
  explicit RestrictTarget(int64_t bits) { simd_restrict_to(bits); }
  ~RestrictTarget() { simd_restrict_to(0); }
};

using test::random_weights;

TEST(Matmul, EveryTargetMatchesReferenceAtOddSizes) {
  const auto targets = simd_targets();
  ASSERT_FALSE(targets.empty());
  for (const auto& t : targets) std::printf("SIMD target: %s\n", t.name.c_str());
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1, 1);
  ThreadPool pool1(1), pool2(2);
  for (const auto& target : targets) {
    RestrictTarget restrict(target.bits);
    for (GgmlType t : kAllTypes) {
      const int block = type_traits(static_cast<uint32_t>(t))->block_elems;
      for (int cols : {1, 7, 33, 96, 161, 300}) {
        cols = (cols + block - 1) / block * block;
        for (int rows : {1, 5, 67}) {
          for (int n : {1, 2, 3, 5, 9}) {
            std::vector<uint8_t> storage;
            const TensorView w = random_weights(t, rows, cols, rng, storage);
            std::vector<float> x(static_cast<size_t>(n) * cols);
            for (auto& v : x) v = u(rng);
            std::vector<float> ref(static_cast<size_t>(n) * rows), y1(ref.size()), y2(ref.size());
            matmul_reference(w, x.data(), n, ref.data());
            matmul(w, x.data(), n, y1.data(), pool1);
            matmul(w, x.data(), n, y2.data(), pool2);
            for (size_t i = 0; i < ref.size(); ++i) {
              ASSERT_NEAR(y1[i], ref[i], 1e-5 * cols) << target.name << " " << type_name(static_cast<uint32_t>(t))
                                                      << " " << rows << "x" << cols << " n=" << n;
              ASSERT_EQ(y1[i], y2[i]);  // threading never changes the numbers
            }
          }
        }
      }
    }
  }
}

TEST(Matmul, SimdDequantizeIsBitIdenticalToScalarTwin) {
  std::mt19937 rng(3);
  for (const auto& target : simd_targets()) {
    RestrictTarget restrict(target.bits);
    for (GgmlType t : kAllTypes) {
      const int block = type_traits(static_cast<uint32_t>(t))->block_elems;
      for (int cols : {1, 13, 256, 517}) {
        cols = (cols + block - 1) / block * block;
        std::vector<uint8_t> storage;
        const TensorView w = random_weights(t, 1, cols, rng, storage);
        std::vector<float> a(static_cast<size_t>(cols)), b(a.size());
        dequantize_row(t, w.row(0), a.data(), cols);
        dequantize_row_simd(t, w.row(0), b.data(), cols);
        for (int i = 0; i < cols; ++i)
          ASSERT_EQ(a[i], b[i]) << target.name << " " << type_name(static_cast<uint32_t>(t)) << " element " << i;
      }
    }
  }
}

TEST(Matmul, BatchRowsEqualTheirDecodeRowsForFloatWeights) {
  // Continuous batching must not change a float model's numbers: a row of a
  // 9-row batch equals the same activation multiplied alone (F16 and BF16
  // decode rows take another kernel than batches: both must sum alike),
  // at widths with and without a partial last vector, on every target.
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1, 1);
  ThreadPool pool(1);
  for (const auto& target : simd_targets()) {
    RestrictTarget restrict(target.bits);
    for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::BF16}) {
      for (int cols : {75, 172, 64, 5}) {
        std::vector<uint8_t> storage;
        const TensorView w = random_weights(t, 37, cols, rng, storage);
        std::vector<float> x(static_cast<size_t>(9 * cols));
        for (auto& v : x) v = u(rng);
        std::vector<float> yb(9 * 37), y1(37);
        matmul(w, x.data(), 9, yb.data(), pool);
        for (int k = 0; k < 9; ++k) {
          matmul(w, x.data() + k * cols, 1, y1.data(), pool);
          for (int r = 0; r < 37; ++r)
            ASSERT_EQ(yb[k * 37 + r], y1[r]) << target.name << " " << type_name(static_cast<uint32_t>(t)) << " cols "
                                             << cols << " row " << r << " of activation " << k;
        }
      }
    }
  }
}

TEST(Matmul, DotHandlesTails) {
  for (int n = 0; n < 20; ++n) {
    std::vector<float> a(n, 1.5f), b(n, 2.0f);
    EXPECT_FLOAT_EQ(dot_f32(a.data(), b.data(), n), 3.0f * n);
  }
}

}  // namespace
}  // namespace ss
