#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "format/ggml_types.h"

namespace ss {
namespace {

TEST(Quant, RoundTripErrorIsBounded) {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const int n = 32 * 5;
  std::vector<float> x(n);
  for (auto& v : x) v = nd(rng);
  struct Case {
    GgmlType t;
    float tol;  // relative to the block's max magnitude
  };
  for (auto c : {Case{GgmlType::F32, 0}, Case{GgmlType::F16, 1e-3f}, Case{GgmlType::BF16, 8e-3f},
                 Case{GgmlType::Q8_0, 1.0f / 127}, Case{GgmlType::Q4_0, 1.0f / 7}}) {
    std::vector<uint8_t> q(row_bytes(c.t, n));
    quantize_row(c.t, x.data(), q.data(), n);
    std::vector<float> y(n);
    dequantize_row(c.t, q.data(), y.data(), n);
    for (int b = 0; b < n / 32; ++b) {
      float amax = 0;
      for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[b * 32 + i]));
      for (int i = 0; i < 32; ++i)
        EXPECT_LE(std::fabs(x[b * 32 + i] - y[b * 32 + i]), c.tol * amax + 1e-6f)
            << type_name(static_cast<uint32_t>(c.t));
    }
  }
}

TEST(Quant, Q4_0LayoutMatchesGgml) {
  // d = 1 (fp16 0x3C00); byte i holds element i (low nibble) and i+16 (high).
  std::vector<uint8_t> blk(18, 0);
  blk[0] = 0x00;
  blk[1] = 0x3C;
  blk[2] = 0x9F;  // element 0: 0xF-8 = 7, element 16: 0x9-8 = 1
  std::vector<float> y(32);
  dequantize_row(GgmlType::Q4_0, blk.data(), y.data(), 32);
  EXPECT_EQ(y[0], 7.0f);
  EXPECT_EQ(y[16], 1.0f);
  EXPECT_EQ(y[1], -8.0f);
}

}  // namespace
}  // namespace ss
