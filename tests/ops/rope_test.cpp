#include "ops/rope.h"

#include <gtest/gtest.h>

#include <cmath>

namespace ss {
namespace {

// q·k after rotation depends only on the position difference, also for
// positions around 10 million.
TEST(Rope, ScoreDependsOnlyOnRelativePosition) {
  RopeTable rt(8, 10000.0f);
  const int pairs = rt.pairs();
  float q0[8] = {0.3f, -1.2f, 0.5f, 0.9f, -0.4f, 0.2f, 1.1f, -0.7f};
  float k0[8] = {-0.6f, 0.8f, 0.1f, -0.3f, 0.7f, 0.4f, -0.2f, 0.5f};
  auto score = [&](int64_t pq, int64_t pk, RopeStyle style) {
    float q[8], k[8], c[4], s[4];
    std::copy(q0, q0 + 8, q);
    std::copy(k0, k0 + 8, k);
    rt.angles(pq, c, s);
    rope_apply(q, 1, 8, pairs, c, s, style);
    rt.angles(pk, c, s);
    rope_apply(k, 1, 8, pairs, c, s, style);
    double d = 0;
    for (int i = 0; i < 8; ++i) d += q[i] * k[i];
    return d;
  };
  for (auto style : {RopeStyle::Interleaved, RopeStyle::Neox}) {
    const double near = score(300, 290, style);
    EXPECT_NEAR(score(10'000'300, 10'000'290, style), near, 2e-5);
    EXPECT_NEAR(score(1'000'000'010, 1'000'000'000, style), near, 2e-4);
  }
}

TEST(Rope, PositionZeroIsIdentity) {
  RopeTable rt(4, 10000.0f);
  float c[2], s[2];
  rt.angles(0, c, s);
  float x[4] = {1, 2, 3, 4};
  rope_apply(x, 1, 4, 2, c, s, RopeStyle::Neox);
  EXPECT_EQ(x[0], 1);
  EXPECT_EQ(x[3], 4);
}

}  // namespace
}  // namespace ss

namespace ss {
namespace {

// Linear scaling rotates position p as p * freq_scale.
TEST(Rope, LinearScalingIsScaledPosition) {
  RopeScaling lin;
  lin.freq_scale = 0.125;
  const RopeTable scaled(32, 1e6, lin), plain(32, 1e6);
  float c1[16], s1[16], c2[16], s2[16];
  scaled.angles(80, c1, s1);
  plain.angles(10, c2, s2);
  for (int i = 0; i < 16; ++i) {
    EXPECT_NEAR(c1[i], c2[i], 1e-6f);
    EXPECT_NEAR(s1[i], s2[i], 1e-6f);
  }
}

// YaRN (ggml's rope_yarn): dims below the beta_fast correction dim keep the
// original frequency, dims above beta_slow's are interpolated by freq_scale,
// and cos/sin carry mscale = 1 + 0.1 ln(1 / freq_scale).
TEST(Rope, YarnBlendsFrequenciesAndScalesMagnitude) {
  RopeScaling y;
  y.freq_scale = 1.0 / 32;
  y.ext_factor = 1;
  y.orig_ctx = 4096;
  const int dim = 64;
  const double base = 150000;
  const RopeTable t(dim, base, y);
  const double mscale = 1 + 0.1 * std::log(32.0);
  auto corr = [&](double n_rot) { return dim * std::log(4096 / (n_rot * 2 * M_PI)) / (2 * std::log(base)); };
  const int low = static_cast<int>(std::floor(corr(32))), high = static_cast<int>(std::ceil(corr(1)));
  ASSERT_LT(0, low);
  ASSERT_LT(high, dim / 2);
  float c[32], s[32];
  const int64_t pos = 7;
  t.angles(pos, c, s);
  for (int i = 0; i < dim / 2; ++i) {
    EXPECT_NEAR(c[i] * c[i] + s[i] * s[i], mscale * mscale, 1e-5) << i;
    const double f = std::pow(base, -2.0 * i / dim);
    const double want = i <= low ? pos * f : i >= high ? pos * f / 32 : std::atan2(s[i], c[i]);
    EXPECT_NEAR(std::atan2(s[i], c[i]), std::remainder(want, 2 * M_PI), 1e-5) << i;
  }
}

}  // namespace
}  // namespace ss
