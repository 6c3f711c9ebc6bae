// The attention inspector sees the engine's real distributions: they sum to 1
// and equal a direct (textbook) computation on a 3-token example.
#include "runtime/attention_stats.h"

#include <cmath>

#include "runtime_helpers.h"
#include "tiny_model.h"

namespace ss {
namespace {

class Recorder : public AttentionObserver {
 public:
  std::map<std::tuple<int, int64_t, int>, std::vector<float>> seen;
  void on_attention(int layer, int head, SeqId, int64_t q, int64_t, int64_t, std::span<const float> p) override {
    seen[{layer, q, head}] = std::vector<float>(p.begin(), p.end());
  }
};

TEST(AttentionStats, MatchesDirectComputationOnThreeTokens) {
  test::TinySpec spec;
  const std::string path = test::write_tiny_model(spec, "attn.gguf");
  auto m = load_model({path, ""});
  std::remove(path.c_str());
  ASSERT_TRUE(m.ok());
  const std::vector<int32_t> toks = {5, 77, 123};
  std::map<std::tuple<int, int64_t, int>, std::vector<double>> want;
  test::reference_forward(*m.value(), toks, {{0}, {0, 1}, {0, 1, 2}}, {{0}, {0, 1}, {0, 1, 2}}, {0, 1, 2},
                          [&](int l, size_t t, int h, const std::vector<double>& p) {
                            want[{l, static_cast<int64_t>(t), h}] = p;
                          });
  Engine e(m.value(), EngineOptions{});
  Recorder rec;
  AttentionStats stats(spec.layers, spec.heads, 1, 0, 0, 8);
  struct Both : AttentionObserver {
    AttentionObserver *a, *b;
    void on_attention(int l, int h, SeqId s, int64_t q, int64_t n, int64_t w, std::span<const float> p) override {
      a->on_attention(l, h, s, q, n, w, p);
      b->on_attention(l, h, s, q, n, w, p);
    }
  } both;
  both.a = &rec;
  both.b = &stats;
  e.set_attention_observer(&both);
  const SeqId id = e.create_sequence(KvPolicy::dense()).value();
  std::vector<std::vector<float>> logits;
  const BatchItem item{id, toks, false};
  ASSERT_TRUE(e.forward(std::span<const BatchItem>(&item, 1), logits).ok());
  ASSERT_EQ(rec.seen.size(), want.size());
  for (const auto& [key, p] : want) {
    const auto& got = rec.seen.at(key);
    ASSERT_EQ(got.size(), p.size());
    double sum = 0;
    for (size_t j = 0; j < p.size(); ++j) {
      EXPECT_NEAR(got[j], p[j], 1e-5);
      sum += got[j];
    }
    EXPECT_NEAR(sum, 1.0, 1e-4);
  }
  const auto shares = stats.finish();
  for (int l = 0; l < spec.layers; ++l)
    for (int h = 0; h < spec.heads; ++h) {
      const auto& s = shares[static_cast<size_t>(l)][static_cast<size_t>(h)];
      EXPECT_EQ(s.queries, 3);
      EXPECT_LE(s.max_sum_error, 1e-4);
      // Query 0 sees only token 0: share 1; uniform share (1 + 1/2 + 1/3) / 3.
      double first = 0;
      for (int64_t t = 0; t < 3; ++t) first += want[{l, t, h}][0];
      EXPECT_NEAR(s.first_k_share, first / 3, 1e-5);
      EXPECT_NEAR(s.uniform_share, (1.0 + 0.5 + 1.0 / 3) / 3, 1e-12);
    }
  EXPECT_EQ(stats.map().size(), 3u);
}

}  // namespace
}  // namespace ss
