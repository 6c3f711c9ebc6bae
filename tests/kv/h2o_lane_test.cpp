// H2O's per-head bookkeeping without a model: what survives a cut back,
// which slots are reused, and that the step rule reduces to sinks/window
// when H = 0.
#include "kv/h2o_lane.h"

#include <gtest/gtest.h>

#include <functional>
#include <random>

namespace ss {
namespace {

std::vector<int64_t> texts(const H2oLane& lane) {
  std::vector<int64_t> out;
  for (const auto& e : lane.entries()) out.push_back(e.text);
  return out;
}

// One step of the one-token rule: append, give each visible entry a mass,
// cut back.
void step(H2oLane& lane, const KvPolicy& p, int64_t t, const std::function<double(int64_t)>& mass) {
  ASSERT_GE(lane.append(t), 0);
  const auto seen = lane.visible(t);
  for (size_t j = 0; j < seen.size(); ++j) lane.add_score(j, mass(seen[j].text));
  lane.cut_back(p, t);
}

TEST(H2oLane, KeepsSinksRecentAndTheHeaviestCandidates) {
  const KvPolicy p = KvPolicy::parse("h2o:2:3:2", 0).value();
  H2oLane lane(static_cast<int>(p.capacity()) + 1);
  // Tokens 5 and 7 draw the most attention; the rest little.
  for (int64_t t = 0; t < 20; ++t) step(lane, p, t, [](int64_t u) { return u == 5 || u == 7 ? 1.0 : 0.01; });
  EXPECT_EQ(texts(lane), (std::vector<int64_t>{0, 1, 5, 7, 17, 18, 19}));
  EXPECT_EQ(static_cast<int64_t>(lane.entries().size()), p.capacity());
}

TEST(H2oLane, TiesEvictTheOlderAndZeroHeavyIsSinksWindow) {
  // No mass at all: every score ties, the oldest candidate goes first, so
  // H2O keeps sinks:S:(R+H)'s entries (H = 0: sinks:S:R's).
  for (int64_t H : {0, 3}) {
    KvPolicy p = KvPolicy::parse("h2o:4:6:" + std::to_string(H), 0).value();
    H2oLane lane(static_cast<int>(p.capacity()) + 1);
    const KvPolicy sw = KvPolicy::sinks_window(4, 6 + H);
    for (int64_t t = 0; t < 50; ++t) {
      step(lane, p, t, [](int64_t) { return 0.0; });
      EXPECT_EQ(texts(lane), sw.resident(t + 1)) << "H=" << H << " t=" << t;
    }
  }
  // The same mass from every query: older tokens have been attended longer,
  // so the first candidates accumulate the most and stay (H2O's known lean
  // towards early tokens).
  const KvPolicy p = KvPolicy::parse("h2o:4:6:3", 0).value();
  H2oLane lane(static_cast<int>(p.capacity()) + 1);
  for (int64_t t = 0; t < 50; ++t) step(lane, p, t, [](int64_t) { return 0.5; });
  EXPECT_EQ(texts(lane), (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 44, 45, 46, 47, 48, 49}));
}

TEST(H2oLane, SlotsStayBelowThePeakAndAreNeverShared) {
  const KvPolicy p = KvPolicy::parse("h2o:1:4:5", 0).value();
  const int chunk = 7;
  H2oLane lane(static_cast<int>(p.capacity()) + chunk);
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> u(0, 1);
  int64_t t = 0;
  for (int round = 0; round < 200; ++round) {
    // A chunk: all its tokens placed first, then its queries in order.
    const int n = 1 + round % chunk;
    for (int i = 0; i < n; ++i) ASSERT_GE(lane.append(t + i), 0);
    for (int i = 0; i < n; ++i, ++t) {
      const auto seen = lane.visible(t);
      EXPECT_EQ(static_cast<int64_t>(seen.size()), std::min(t, p.capacity()) + 1);
      for (size_t j = 0; j < seen.size(); ++j) lane.add_score(j, u(rng));
      lane.cut_back(p, t);
    }
    std::vector<bool> used(p.capacity() + chunk, false);
    for (const auto& e : lane.entries()) {
      ASSERT_LT(e.slot, p.capacity() + chunk);
      ASSERT_FALSE(used[static_cast<size_t>(e.slot)]) << "slot shared";
      used[static_cast<size_t>(e.slot)] = true;
    }
  }
  // Full lane: no slot left is a value, not a crash.
  H2oLane tiny(2);
  EXPECT_GE(tiny.append(0), 0);
  EXPECT_GE(tiny.append(1), 0);
  EXPECT_EQ(tiny.append(2), -1);
}

}  // namespace
}  // namespace ss
