#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>

#include "format/ggml_types.h"

namespace ss {
namespace {

TEST(Quant, RoundTripErrorIsBounded) {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const int n = 256 * 3;
  std::vector<float> x(n);
  for (auto& v : x) v = nd(rng);
  struct Case {
    GgmlType t;
    float tol;  // relative to the block's max magnitude
  };
  for (auto c : {Case{GgmlType::F32, 0}, Case{GgmlType::F16, 1e-3f}, Case{GgmlType::BF16, 8e-3f},
                 Case{GgmlType::Q8_0, 1.0f / 127}, Case{GgmlType::Q4_0, 1.0f / 7}, Case{GgmlType::Q4_K, 0.15f},
                 Case{GgmlType::Q5_K, 0.08f}, Case{GgmlType::Q6_K, 0.05f},
                 // E2M1's top binade holds 4 and 6 (x 2^(e-127)): up to a quarter of amax.
                 Case{GgmlType::MXFP4, 0.25f}}) {
    std::vector<uint8_t> q(row_bytes(c.t, n));
    quantize_row(c.t, x.data(), q.data(), n);
    std::vector<float> y(n);
    dequantize_row(c.t, q.data(), y.data(), n);
    // Error relative to the largest magnitude in the block that owns the scale.
    const int B = std::max(32, type_traits(static_cast<uint32_t>(c.t))->block_elems);
    for (int b = 0; b < n / B; ++b) {
      float amax = 0;
      for (int i = 0; i < B; ++i) amax = std::max(amax, std::fabs(x[b * B + i]));
      for (int i = 0; i < B; ++i)
        EXPECT_LE(std::fabs(x[b * B + i] - y[b * B + i]), c.tol * amax + 1e-6f)
            << type_name(static_cast<uint32_t>(c.t));
    }
  }
}

// NaN and infinities reach the quantizers (a model's weights, a restored
// session's KV rows, overflowed activations): every type quantizes them
// without undefined behaviour (the sanitizer builds run this), a block
// without them comes out as it would alone, and the symmetric types put NaN
// at the level that decodes to zero and leave its block's other values
// unharmed.
TEST(Quant, NonFiniteValuesQuantizeToDefinedLevels) {
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  constexpr int n = 256 * 3;  // one super-block each: clean, one NaN, one +inf and one -inf
  std::vector<float> x(n);
  for (auto& v : x) v = nd(rng);
  x[256 + 5] = NAN;
  x[512 + 7] = INFINITY;
  x[512 + 200] = -INFINITY;
  for (GgmlType t : {GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q4_K, GgmlType::Q5_K,
                     GgmlType::Q6_K, GgmlType::MXFP4}) {
    const std::string name = type_name(static_cast<uint32_t>(t));
    std::vector<uint8_t> q(row_bytes(t, n)), clean(row_bytes(t, 256));
    quantize_row(t, x.data(), q.data(), n);
    quantize_row(t, x.data(), clean.data(), 256);
    EXPECT_TRUE(std::equal(clean.begin(), clean.end(), q.begin())) << name;
    if (t != GgmlType::Q8_0 && t != GgmlType::Q4_0) continue;
    std::vector<float> y(n);
    dequantize_row(t, q.data(), y.data(), n);
    EXPECT_EQ(y[256 + 5], 0.0f) << name;
    const int b0 = 256 + 5 - 5 % 32;  // the NaN's block of 32
    float amax = 0;
    for (int i = b0; i < b0 + 32; ++i)
      if (i != 256 + 5) amax = std::max(amax, std::fabs(x[i]));
    for (int i = b0; i < b0 + 32; ++i) {
      if (i == 256 + 5) continue;
      EXPECT_LE(std::fabs(x[i] - y[i]), amax / (t == GgmlType::Q8_0 ? 127 : 7) + 1e-6f) << name;
    }
  }
}

// MXFP4 as ggml lays it out: E8M0 byte, then element i in the low nibble
// of byte i and element i + 16 in its high nibble; E2M1 codes 0..7 are
// 0, 0.5, 1, 1.5, 2, 3, 4, 6 and 8..15 their negatives.
TEST(Quant, Mxfp4LayoutMatchesGgml) {
  std::vector<uint8_t> b(kMxfp4Bytes, 0);
  b[0] = 127;    // scale 2^0
  b[1] = 0x97;   // element 0: code 7 (6.0); element 16: code 9 (-0.5)
  b[16] = 0xF3;  // element 15: code 3 (1.5); element 31: code 15 (-6.0)
  std::vector<float> y(kMxfp4Block);
  dequantize_row(GgmlType::MXFP4, b.data(), y.data(), kMxfp4Block);
  EXPECT_FLOAT_EQ(y[0], 6.0f);
  EXPECT_FLOAT_EQ(y[16], -0.5f);
  EXPECT_FLOAT_EQ(y[15], 1.5f);
  EXPECT_FLOAT_EQ(y[31], -6.0f);
  EXPECT_FLOAT_EQ(y[1], 0.0f);
  b[0] = 130;  // scale 2^3
  dequantize_row(GgmlType::MXFP4, b.data(), y.data(), kMxfp4Block);
  EXPECT_FLOAT_EQ(y[0], 48.0f);
  EXPECT_FLOAT_EQ(mxfp4_half_scale(0), std::ldexp(1.0f, -128));  // subnormal, exact
  EXPECT_FLOAT_EQ(mxfp4_half_scale(255), std::ldexp(1.0f, 127));
}

TEST(Quant, KQuantLayoutsMatchGgml) {
  // Hand-built super-blocks, values worked out from ggml's block definitions.
  std::vector<uint8_t> q4k(kQ4_KBytes, 0);
  q4k[0] = 0x00, q4k[1] = 0x3C;  // d = 1
  q4k[2] = 0x00, q4k[3] = 0x38;  // dmin = 0.5
  q4k[4 + 0] = 2;                // sub-block 0: scale 2
  q4k[4 + 4] = 3;                // sub-block 0: min 3
  q4k[4 + 8] = 0x45;             // sub-block 4: scale 5 (low bits), min 4 (low bits)
  q4k[4 + 0] |= 0x40;            // sub-block 4: scale high bits 01 -> 5 + 16 = 21
  q4k[16 + 0] = 0x97;            // element 0 = 7 (low nibble), element 32 = 9 (sub-block 1)
  q4k[16 + 64] = 0x0A;           // element 128 (sub-block 4) = 10
  std::vector<float> y(kQkK);
  dequantize_row(GgmlType::Q4_K, q4k.data(), y.data(), kQkK);
  EXPECT_FLOAT_EQ(y[0], 2 * 7 - 0.5f * 3);
  EXPECT_FLOAT_EQ(y[32], 0.0f);  // sub-block 1 has scale 0 and min 0
  EXPECT_FLOAT_EQ(y[128], 21 * 10 - 0.5f * 4);

  std::vector<uint8_t> q6k(kQ6_KBytes, 0);
  q6k[208] = 0x00, q6k[209] = 0x3C;  // d = 1
  for (int i = 0; i < 16; ++i) q6k[192 + i] = static_cast<uint8_t>(i + 1);
  q6k[0] = 0x21;    // element 0 low nibble 1, element 64 low nibble 2
  q6k[128] = 0xE4;  // qh bits: element 0 -> 0, element 32 -> 1, element 64 -> 2, element 96 -> 3
  dequantize_row(GgmlType::Q6_K, q6k.data(), y.data(), kQkK);
  EXPECT_FLOAT_EQ(y[0], 1.0f * (1 - 32));
  EXPECT_FLOAT_EQ(y[32], 3.0f * ((1 << 4) - 32));
  EXPECT_FLOAT_EQ(y[64], 5.0f * (2 + (2 << 4) - 32));
  EXPECT_FLOAT_EQ(y[96], 7.0f * ((3 << 4) - 32));
}

// The word-wise unpacking of all eight 6-bit scales and mins gives what the
// per-sub-block one gives, for random scale bytes.
TEST(Quant, KQuantScalesMinsAtOnceMatchOneByOne) {
  std::mt19937 rng(11);
  for (int rep = 0; rep < 2000; ++rep) {
    uint8_t bytes[12], sc[8], m[8];
    for (auto& b : bytes) b = static_cast<uint8_t>(rng());
    kquant_scales_mins(bytes, sc, m);
    for (int j = 0; j < 8; ++j) {
      int s1, m1;
      kquant_scale_min(bytes, j, s1, m1);
      ASSERT_EQ(sc[j], s1) << "rep " << rep << " sub-block " << j;
      ASSERT_EQ(m[j], m1) << "rep " << rep << " sub-block " << j;
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
