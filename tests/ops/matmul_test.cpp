// matmul against its scalar (double-accumulating) reference at odd sizes for
// every weight type, single- and multi-threaded.
#include "ops/matmul.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace ss {
namespace {

TEST(Matmul, MatchesReferenceAtOddSizes) {
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1, 1);
  ThreadPool pool1(1), pool2(2);
  for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q8_0, GgmlType::Q4_0}) {
    const bool blocked = t == GgmlType::Q8_0 || t == GgmlType::Q4_0;
    for (int cols : {1, 7, 33, 96, 161}) {
      if (blocked) cols = (cols + 31) / 32 * 32;
      for (int rows : {1, 5, 67}) {
        for (int n : {1, 3}) {
          std::vector<float> wf(static_cast<size_t>(rows * cols));
          for (auto& v : wf) v = u(rng);
          std::vector<uint8_t> wq(row_bytes(t, cols) * rows);
          for (int r = 0; r < rows; ++r)
            quantize_row(t, wf.data() + r * cols, wq.data() + r * row_bytes(t, cols), cols);
          TensorView w;
          w.type = t;
          w.ne0 = cols;
          w.ne1 = rows;
          w.data = wq.data();
          std::vector<float> x(static_cast<size_t>(n * cols));
          for (auto& v : x) v = u(rng);
          std::vector<float> ref(static_cast<size_t>(n * rows)), y1(ref.size()), y2(ref.size());
          matmul_reference(w, x.data(), n, ref.data());
          matmul(w, x.data(), n, y1.data(), pool1);
          matmul(w, x.data(), n, y2.data(), pool2);
          for (size_t i = 0; i < ref.size(); ++i) {
            EXPECT_NEAR(y1[i], ref[i], 1e-5 * cols)
                << type_name(static_cast<uint32_t>(t)) << " " << rows << "x" << cols;
            EXPECT_EQ(y1[i], y2[i]);  // threading never changes the numbers
          }
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
