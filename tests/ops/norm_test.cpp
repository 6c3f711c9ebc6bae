// RMSNorm against its double-precision scalar twin at odd sizes, in place too,
// in every clone the CPU and the cap allow.
#include "ops/norm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "cpu_levels.h"

namespace ss {
namespace {

void check_MatchesScalarTwinAtOddSizes() {
  std::mt19937 rng(2);
  std::normal_distribution<float> nd(0, 2);
  for (int n : {1, 3, 7, 8, 9, 15, 17, 64, 100, 288, 2049}) {
    std::vector<float> x(n), w(n), a(n), b(n);
    for (auto& v : x) v = nd(rng);
    for (auto& v : w) v = 1 + 0.1f * nd(rng);
    rms_norm(x.data(), w.data(), n, 1e-5f, a.data());
    rms_norm_scalar(x.data(), w.data(), n, 1e-5f, b.data());
    for (int i = 0; i < n; ++i) ASSERT_NEAR(a[i], b[i], 1e-5f * (1 + std::fabs(b[i]))) << "n=" << n << " i=" << i;
    rms_norm(x.data(), w.data(), n, 1e-5f, x.data());  // in place
    for (int i = 0; i < n; ++i) ASSERT_EQ(x[i], a[i]);
  }
}

TEST(RmsNorm, MatchesScalarTwinAtOddSizes) { test::at_every_clone_level(check_MatchesScalarTwinAtOddSizes); }

}  // namespace
}  // namespace ss

namespace ss {
namespace {

// LayerNorm against a double-precision evaluation, with and without bias,
// at odd sizes and an offset mean (where a one-pass variance would cancel).
TEST(LayerNorm, MatchesDoubleReference) {
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0, 1);
  for (int n : {1, 7, 64, 97}) {
    std::vector<float> x(static_cast<size_t>(n)), w(x.size()), b(x.size()), out(x.size());
    for (auto& v : x) v = 100.0f + nd(rng);
    for (auto& v : w) v = 1.0f + 0.1f * nd(rng);
    for (auto& v : b) v = 0.1f * nd(rng);
    double mean = 0, var = 0;
    for (float v : x) mean += v;
    mean /= n;
    for (float v : x) var += (v - mean) * (v - mean);
    var /= n;
    for (bool bias : {false, true}) {
      layer_norm(x.data(), w.data(), bias ? b.data() : nullptr, n, 1e-5f, out.data());
      for (int i = 0; i < n; ++i) {
        const double want = (x[i] - mean) / std::sqrt(var + 1e-5) * w[i] + (bias ? b[i] : 0.0);
        EXPECT_NEAR(out[i], want, 2e-4) << n << " " << i;
      }
    }
  }
}

void check_LayerNormMatchesScalarTwin() {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0, 1);
  for (int n : {1, 3, 7, 8, 9, 15, 17, 64, 97, 768, 2049}) {
    std::vector<float> x(static_cast<size_t>(n)), w(x.size()), b(x.size()), got(x.size()), want(x.size());
    for (auto& v : x) v = 30.0f + 3.0f * nd(rng);  // an offset mean, as residual streams have
    for (auto& v : w) v = 1.0f + 0.1f * nd(rng);
    for (auto& v : b) v = 0.1f * nd(rng);
    for (bool bias : {false, true}) {
      const float* bp = bias ? b.data() : nullptr;
      layer_norm(x.data(), w.data(), bp, n, 1e-5f, got.data());
      layer_norm_scalar(x.data(), w.data(), bp, n, 1e-5f, want.data());
      // Sums in double either way: the mean and scale agree to float
      // rounding, so each output to a few ulps.
      for (int i = 0; i < n; ++i)
        ASSERT_NEAR(got[i], want[i], 1e-6f * (1 + std::fabs(want[i]))) << "n=" << n << " i=" << i;
      std::vector<float> in_place = x;
      layer_norm(in_place.data(), w.data(), bp, n, 1e-5f, in_place.data());
      for (int i = 0; i < n; ++i) ASSERT_EQ(in_place[i], got[i]) << "n=" << n << " i=" << i;
    }
  }
}

TEST(LayerNorm, MatchesScalarTwinAtOddSizes) { test::at_every_clone_level(check_LayerNormMatchesScalarTwin); }

}  // namespace
}  // namespace ss
