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
