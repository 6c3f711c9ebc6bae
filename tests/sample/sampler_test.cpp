#include "sample/sampler.h"

#include <gtest/gtest.h>

#include <map>

namespace ss {
namespace {

TEST(Sampler, GreedyPicksArgmaxLowestIdOnTies) {
  SamplingParams p;
  p.temperature = 0;
  Sampler s(p);
  const std::vector<float> l = {0.1f, 2.0f, 2.0f, -1.0f};
  EXPECT_EQ(s.sample(l, {}), 1);
}

TEST(Sampler, SeedMakesSamplingReproducible) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0;
  p.seed = 42;
  std::vector<float> l(50);
  for (size_t i = 0; i < l.size(); ++i) l[i] = static_cast<float>(i % 7) * 0.3f;
  Sampler a(p), b(p);
  std::vector<int32_t> sa, sb;
  for (int i = 0; i < 100; ++i) {
    sa.push_back(a.sample(l, {}));
    sb.push_back(b.sample(l, {}));
  }
  EXPECT_EQ(sa, sb);
  p.seed = 43;
  Sampler c(p);
  std::vector<int32_t> sc;
  for (int i = 0; i < 100; ++i) sc.push_back(c.sample(l, {}));
  EXPECT_NE(sa, sc);
}

TEST(Sampler, FiltersRestrictTheCandidates) {
  const std::vector<float> l = {5.0f, 4.0f, 0.0f, -3.0f, 4.5f};
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_p = 1.0f;
  p.min_p = 0;
  p.top_k = 2;
  Sampler k(p);
  for (int i = 0; i < 200; ++i) {
    const int32_t t = k.sample(l, {});
    EXPECT_TRUE(t == 0 || t == 4) << t;
  }
  p.top_k = 0;
  p.min_p = 0.5f;  // keeps ids with p >= 0.5 * p(max): 0 (1.0), 4 (0.61)
  Sampler mp(p);
  for (int i = 0; i < 200; ++i) {
    const int32_t t = mp.sample(l, {});
    EXPECT_TRUE(t == 0 || t == 4) << t;
  }
  p.min_p = 0;
  p.top_p = 0.3f;  // the top token alone has more mass than 0.3
  Sampler tp(p);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(tp.sample(l, {}), 0);
}

TEST(Sampler, RepetitionPenaltyDemotesRecentTokens) {
  SamplingParams p;
  p.temperature = 0;
  p.repeat_penalty = 2.0f;
  Sampler s(p);
  const std::vector<float> l = {3.0f, 2.0f, 1.0f};
  const std::vector<int32_t> hist = {0};
  EXPECT_EQ(s.sample(l, hist), 1);  // 3/2 = 1.5 < 2
}

TEST(Sampler, ValidatesParams) {
  SamplingParams p;
  p.temperature = -1;
  EXPECT_FALSE(p.validate().ok());
  p = SamplingParams{};
  p.top_p = 0;
  EXPECT_FALSE(p.validate().ok());
  EXPECT_TRUE(SamplingParams{}.validate().ok());
}

}  // namespace
}  // namespace ss
