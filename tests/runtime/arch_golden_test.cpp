// Every architecture against the logits llama.cpp computes for the same
// tiny random model (../shared/golden/arch/<arch>/, see its README), in one
// batch, token by token and in uneven prefill chunks. Tolerance (the issue's):
// max |delta log-softmax| and max |delta NLL| <= 5e-4, top-1 identical except
// near-ties. The GELU archs compare against logits_exactgelu.f32 (llama.cpp
// with an exact fp32 tanh-GELU, as ours).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>

#include "model/model.h"
#include "ops/activations.h"
#include "runtime/engine.h"
#include "test_paths.h"

namespace ss {
namespace {

constexpr double kTol = 5e-4;
// A top-1 mismatch is a near-tie when the reference's logits of the two
// tokens differ by less than this.
constexpr double kNearTie = 1e-3;

struct Golden {
  std::vector<int32_t> tokens;
  std::vector<float> logits;  // [n x vocab]
  int vocab = 0;
};

Golden load_golden(const std::string& dir) {
  Golden g;
  g.tokens = test::read_ids(dir + "/tokens.txt");
  std::string raw = test::read_file(dir + "/logits_exactgelu.f32");
  if (raw.empty()) raw = test::read_file(dir + "/logits.f32");
  g.logits.resize(raw.size() / 4);
  std::memcpy(g.logits.data(), raw.data(), g.logits.size() * 4);
  g.vocab = g.tokens.empty() ? 0 : static_cast<int>(g.logits.size() / g.tokens.size());
  return g;
}

std::vector<double> log_softmax(const float* x, int n) {
  double mx = x[0];
  for (int i = 1; i < n; ++i) mx = std::max<double>(mx, x[i]);
  double sum = 0;
  for (int i = 0; i < n; ++i) sum += std::exp(x[i] - mx);
  std::vector<double> out(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) out[static_cast<size_t>(i)] = x[i] - mx - std::log(sum);
  return out;
}

struct Agreement {
  double max_dlogsoftmax = 0, max_dnll = 0;
  int top1_mismatch = 0;  // not near-ties
};

Agreement compare(const Golden& g, const std::vector<float>& ours) {
  Agreement a;
  const int V = g.vocab;
  for (size_t i = 0; i < g.tokens.size(); ++i) {
    const float* ref = g.logits.data() + i * V;
    const float* got = ours.data() + i * V;
    const auto lr = log_softmax(ref, V), lg = log_softmax(got, V);
    for (int v = 0; v < V; ++v)
      a.max_dlogsoftmax = std::max(a.max_dlogsoftmax, std::abs(lr[static_cast<size_t>(v)] - lg[static_cast<size_t>(v)]));
    if (i + 1 < g.tokens.size()) {
      const auto next = static_cast<size_t>(g.tokens[i + 1]);
      a.max_dnll = std::max(a.max_dnll, std::abs(lr[next] - lg[next]));
    }
    const int tr = static_cast<int>(std::max_element(ref, ref + V) - ref);
    const int tg = static_cast<int>(std::max_element(got, got + V) - got);
    if (tr != tg && ref[tr] - ref[tg] >= kNearTie) ++a.top1_mismatch;
  }
  return a;
}

// Logits for every position: `chunk` tokens per forward call (0: all at once).
std::vector<float> run(const std::shared_ptr<const Model>& m, const std::vector<int32_t>& toks, int chunk,
                       int max_chunk, const KvPolicy& pol = KvPolicy::dense()) {
  EngineOptions eo;
  eo.kv_blocks = 64;
  eo.max_chunk = max_chunk;
  Engine e(m, eo);
  const SeqId id = e.create_sequence(pol).value();
  std::vector<float> out;
  const size_t step = chunk > 0 ? static_cast<size_t>(chunk) : toks.size();
  for (size_t i = 0; i < toks.size(); i += step) {
    const size_t n = std::min(step, toks.size() - i);
    const BatchItem item{id, std::span<const int32_t>(toks.data() + i, n), true};
    std::vector<std::vector<float>> logits;
    const Status st = e.forward(std::span<const BatchItem>(&item, 1), logits);
    EXPECT_TRUE(st.ok()) << (st.ok() ? "" : st.error().message);
    out.insert(out.end(), logits[0].begin(), logits[0].end());
  }
  return out;
}

class ArchGolden : public ::testing::TestWithParam<const char*> {};

TEST_P(ArchGolden, MatchesLlamaCppBatchTokenByTokenAndChunked) {
  const std::string dir = test::shared("golden/arch/" + std::string(GetParam()));
  const Golden g = load_golden(dir);
  ASSERT_EQ(g.tokens.size(), 64u) << dir;
  ASSERT_EQ(g.vocab, 512);
  auto mr = load_model({dir + "/model.gguf", ""});
  ASSERT_TRUE(mr.ok()) << mr.error().message;
  const auto m = mr.value();
  struct Mode {
    const char* name;
    int chunk, max_chunk;
  };
  for (const Mode& mode : {Mode{"batch", 0, 64}, Mode{"token-by-token", 1, 64}, Mode{"chunks of 7, max_chunk 5", 7, 5}}) {
    const auto ours = run(m, g.tokens, mode.chunk, mode.max_chunk);
    ASSERT_EQ(ours.size(), g.logits.size());
    const Agreement a = compare(g, ours);
    EXPECT_LE(a.max_dlogsoftmax, kTol) << GetParam() << " " << mode.name;
    EXPECT_LE(a.max_dnll, kTol) << GetParam() << " " << mode.name;
    EXPECT_EQ(a.top1_mismatch, 0) << GetParam() << " " << mode.name;
    std::printf("[arch %s] %-26s max |d log-softmax| %.2e  max |d NLL| %.2e\n", GetParam(), mode.name,
                a.max_dlogsoftmax, a.max_dnll);
  }
}

INSTANTIATE_TEST_SUITE_P(All, ArchGolden,
                         ::testing::Values("llama", "gpt-oss", "gptneox", "gemma3", "mpt", "qwen3", "phi2"),
                         [](const auto& info) {
                           std::string n = info.param;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

}  // namespace
}  // namespace ss
