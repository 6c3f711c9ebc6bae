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

TEST(Swiglu, MatchesScalarTwinAtOddSizes) { test::at_every_cpu_level(check_MatchesScalarTwinAtOddSizes); }

}  // namespace
}  // namespace ss
