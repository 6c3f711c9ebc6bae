#include "sample/logprobs.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace ss {
namespace {

TEST(Logprobs, LogSoftmaxOfRawLogitsWithTheBestAlternativesFirst) {
  std::mt19937 rng(3);
  std::normal_distribution<float> d(0.0f, 3.0f);
  for (size_t n : {1u, 2u, 7u, 33u, 512u}) {
    std::vector<float> l(n);
    for (float& v : l) v = d(rng);
    double z = 0;
    for (float v : l) z += std::exp(static_cast<double>(v));
    const int32_t chosen = static_cast<int32_t>(n / 2);
    const TokenLogprob lp = token_logprob(l, chosen, static_cast<int>(n) + 5);  // more than the vocabulary
    EXPECT_EQ(lp.id, chosen);
    EXPECT_NEAR(lp.logprob, l[n / 2] - std::log(z), 1e-5);
    ASSERT_EQ(lp.top.size(), n);
    double mass = 0;
    for (size_t i = 0; i < n; ++i) {
      mass += std::exp(static_cast<double>(lp.top[i].second));
      EXPECT_NEAR(lp.top[i].second, l[static_cast<size_t>(lp.top[i].first)] - std::log(z), 1e-5);
      if (i > 0) {
        EXPECT_GE(lp.top[i - 1].second, lp.top[i].second);
      }
    }
    EXPECT_NEAR(mass, 1.0, 1e-5) << n;
  }
}

TEST(Logprobs, TiesListTheLowerIdFirstAndHugeLogitsStayFinite) {
  const std::vector<float> l = {1e4f, 2e4f, 2e4f, -1e4f};
  const TokenLogprob lp = token_logprob(l, 3, 2);
  ASSERT_EQ(lp.top.size(), 2u);
  EXPECT_EQ(lp.top[0].first, 1);
  EXPECT_EQ(lp.top[1].first, 2);
  EXPECT_NEAR(lp.top[0].second, -std::log(2.0f), 1e-6);
  EXPECT_NEAR(lp.logprob, -3e4f, 1.0f);
  EXPECT_TRUE(token_logprob(l, 0, 0).top.empty());
}

}  // namespace
}  // namespace ss
