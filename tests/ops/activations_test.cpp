// SwiGLU against its libm twin at odd sizes, over the range where exp is
// clamped too, in place too, in every clone the CPU and the cap allow.
#include "ops/activations.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "cpu_levels.h"

namespace ss {
namespace {

void check_MatchesScalarTwinAtOddSizes() {
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0, 4);
  for (int n : {1, 3, 15, 16, 17, 33, 100, 5632, 5633}) {
    std::vector<float> g(n), u(n), a(n), b(n);
    for (auto& v : g) v = nd(rng);
    for (auto& v : u) v = nd(rng);
    if (n > 4) {  // saturating gates: silu(g) ~ g above, ~ -0 below
      g[0] = 95;
      g[1] = -95;
      g[2] = 200;
      g[3] = -1000;
    }
    swiglu(g.data(), u.data(), n, a.data());
    swiglu_scalar(g.data(), u.data(), n, b.data());
    for (int i = 0; i < n; ++i)
      ASSERT_NEAR(a[i], b[i], 1e-6f * std::fabs(b[i]) + 1e-30f) << "n=" << n << " i=" << i << " g=" << g[i];
    swiglu(g.data(), u.data(), n, g.data());  // in place, as the engine calls it
    for (int i = 0; i < n; ++i) ASSERT_EQ(g[i], a[i]);
  }
}

TEST(Swiglu, MatchesScalarTwinAtOddSizes) { test::at_every_clone_level(check_MatchesScalarTwinAtOddSizes); }

// GELU and GeGLU (x * sigmoid(2u) with the polynomial exp) against their
// libm-tanh twins at odd sizes, over gates where tanh saturates both ways,
// in place, in every clone. Tolerance: a few float roundings of the result,
// relative, plus an absolute floor where gelu nears 0 (x far below 0, or x
// near 0 where gelu ~ x / 2).
void check_GeluMatchesScalarTwinAtOddSizes() {
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0, 3);
  for (int n : {1, 3, 15, 16, 17, 33, 100, 3072, 3073}) {
    std::vector<float> g(n), u(n), a(n), b(n), x(n), y(n);
    for (auto& v : g) v = nd(rng);
    for (auto& v : u) v = nd(rng);
    if (n > 5) {
      g[0] = 40;
      g[1] = -40;
      g[2] = 1e-20f;
      g[3] = -1000;
      g[4] = 0;
    }
    geglu(g.data(), u.data(), n, a.data());
    geglu_scalar(g.data(), u.data(), n, b.data());
    for (int i = 0; i < n; ++i)
      ASSERT_NEAR(a[i], b[i], 1e-6f * std::fabs(b[i]) + 1e-7f * std::fabs(u[i]))
          << "geglu n=" << n << " i=" << i << " g=" << g[i];
    x = g;
    y = g;
    gelu_tanh(x.data(), n);
    gelu_tanh_scalar(y.data(), n);
    for (int i = 0; i < n; ++i)
      ASSERT_NEAR(x[i], y[i], 1e-6f * std::fabs(y[i]) + 1e-7f) << "gelu n=" << n << " i=" << i << " g=" << g[i];
    geglu(g.data(), u.data(), n, g.data());  // in place, as the engine calls it
    for (int i = 0; i < n; ++i) ASSERT_EQ(g[i], a[i]);
  }
}

TEST(Gelu, MatchesScalarTwinAtOddSizes) { test::at_every_clone_level(check_GeluMatchesScalarTwinAtOddSizes); }

}  // namespace
}  // namespace ss

namespace ss {
namespace {

TEST(Gelu, TanhApproximationAtKnownPoints) {
  float x[4] = {0.0f, 1.0f, -1.0f, 3.0f};
  gelu_tanh(x, 4);
  EXPECT_FLOAT_EQ(x[0], 0.0f);
  EXPECT_NEAR(x[1], 0.841192f, 1e-6f);
  EXPECT_NEAR(x[2], -0.158808f, 1e-6f);
  EXPECT_NEAR(x[3], 2.996363f, 1e-6f);
  const float g[2] = {1.0f, -1.0f}, u[2] = {2.0f, 3.0f};
  float out[2];
  geglu(g, u, 2, out);
  EXPECT_NEAR(out[0], 2 * 0.841192f, 2e-6f);
  EXPECT_NEAR(out[1], 3 * -0.158808f, 2e-6f);
}

// gpt-oss's swiglu: the gate is capped at the limit from above only, the up
// projection clamped both ways and offset by one.
TEST(SwigluOai, ClampsAndOffsets) {
  const float gate[3] = {10.0f, -10.0f, 0.5f}, up[3] = {-20.0f, 20.0f, 0.25f};
  float out[3];
  swiglu_oai(gate, up, 3, 1.702f, 7.0f, out);
  auto sig = [](float z) { return 1.0f / (1.0f + std::exp(-z)); };
  EXPECT_NEAR(out[0], 7.0f * sig(1.702f * 7.0f) * (-7.0f + 1.0f), 1e-5f);
  EXPECT_NEAR(out[1], -10.0f * sig(-17.02f) * (7.0f + 1.0f), 1e-5f);
  EXPECT_NEAR(out[2], 0.5f * sig(0.851f) * 1.25f, 1e-6f);
}

}  // namespace
}  // namespace ss
