#include "sample/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>

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

// llama.cpp's penalties sampler, written out for one token: repetition
// (divide positive / multiply negative logits), then c * frequency +
// presence, over the last repeat_last_n tokens only.
float penalized(float logit, int count, const SamplingParams& p) {
  if (count == 0) return logit;
  logit = logit > 0 ? logit / p.repeat_penalty : logit * p.repeat_penalty;
  return logit - static_cast<float>(count) * p.frequency_penalty - p.presence_penalty;
}

TEST(Sampler, PenaltiesCountOnlyTheWindowAndMatchLlamaCppsFormula) {
  std::mt19937 rng(7);
  std::normal_distribution<float> logit(0.0f, 2.0f);
  std::uniform_int_distribution<int32_t> id(0, 11);
  std::uniform_real_distribution<float> pen(-2.0f, 2.0f);
  int changed = 0;
  for (int trial = 0; trial < 500; ++trial) {
    SamplingParams p;
    p.temperature = 0;
    p.repeat_penalty = trial % 3 == 0 ? 1.0f : 1.0f + static_cast<float>(trial % 7) * 0.1f;
    p.frequency_penalty = pen(rng);
    p.presence_penalty = pen(rng);
    p.repeat_last_n = trial % 9;
    std::vector<float> l(12);
    for (float& v : l) v = logit(rng);
    std::vector<int32_t> hist(static_cast<size_t>(trial % 20));
    for (int32_t& t : hist) t = id(rng);
    std::vector<int> count(l.size(), 0);
    const size_t n = std::min(hist.size(), static_cast<size_t>(p.repeat_last_n));
    for (size_t i = hist.size() - n; i < hist.size(); ++i) ++count[static_cast<size_t>(hist[i])];
    std::vector<float> want(l.size());
    for (size_t i = 0; i < l.size(); ++i) want[i] = penalized(l[i], count[i], p);
    Sampler s(p);
    const int32_t got = s.sample(l, hist);
    EXPECT_EQ(got, argmax(want)) << "trial " << trial;
    changed += argmax(want) != argmax(l);
  }
  EXPECT_GT(changed, 50);  // the penalties decided many of the picks
}

TEST(Sampler, LogitBiasComesFirstAndCanBanOrForce) {
  const std::vector<float> l = {5.0f, 4.0f, 0.0f, -3.0f};
  SamplingParams p;
  p.temperature = 0;
  p.logit_bias = {{0, -100.0f}};
  EXPECT_EQ(Sampler(p).sample(l, {}), 1);
  p.logit_bias = {{3, 100.0f}, {99, 100.0f}};  // an id past the vocabulary is ignored
  EXPECT_EQ(Sampler(p).sample(l, {}), 3);
  // Before top-k: a forced token survives a top-k of 1 at any temperature.
  p.temperature = 1.5f;
  p.top_k = 1;
  Sampler s(p);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(s.sample(l, {}), 3);
  p.logit_bias = {{1, std::nanf("")}};
  EXPECT_FALSE(p.validate().ok());
  p.logit_bias = {{-1, 1.0f}};
  EXPECT_FALSE(p.validate().ok());
  p.logit_bias.clear();
  p.frequency_penalty = INFINITY;
  EXPECT_FALSE(p.validate().ok());
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
