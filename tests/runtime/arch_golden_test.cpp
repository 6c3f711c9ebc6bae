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
#include "runtime_helpers.h"
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
      a.max_dlogsoftmax =
          std::max(a.max_dlogsoftmax, std::abs(lr[static_cast<size_t>(v)] - lg[static_cast<size_t>(v)]));
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

// Counts what the inspector's path hands out; probabilities must sum to at most 1.
struct CountingObserver : AttentionObserver {
  int64_t rows = 0;
  void on_attention(int, int, SeqId, int64_t, int64_t, int64_t, std::span<const float> p) override {
    double sum = 0;
    for (float x : p) sum += x;
    EXPECT_LE(sum, 1.0 + 1e-5);
    ++rows;
  }
};

// Logits for every position: `chunk` tokens per forward call (0: all at once).
// The pool holds the whole sequence (dense), however long the golden's is.
std::vector<float> run(const std::shared_ptr<const Model>& m, const std::vector<int32_t>& toks, int chunk,
                       int max_chunk, const KvPolicy& pol = KvPolicy::dense(), AttentionObserver* obs = nullptr) {
  EngineOptions eo;
  eo.kv_blocks = test::dense_blocks(toks.size(), 64);
  eo.max_chunk = max_chunk;
  Engine e(m, eo);
  e.set_attention_observer(obs);
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

class ArchGolden : public ::testing::TestWithParam<const char*> {
 protected:
  std::string dir() const { return test::shared("golden/arch/" + std::string(GetParam())); }
  std::shared_ptr<const Model> model() const {
    auto mr = load_model({dir() + "/model.gguf", ""});
    EXPECT_TRUE(mr.ok()) << (mr.ok() ? "" : mr.error().message);
    return mr.ok() ? mr.value() : nullptr;
  }
};

// The goldens' sizes come from their files (tokens.txt, the model's
// vocabulary), not from these: other sequences and dims check the same.
void expect_golden_shape(const Golden& g, const Model& m, const std::string& dir) {
  ASSERT_GE(g.tokens.size(), 32u) << dir;
  ASSERT_EQ(g.vocab, m.config.n_vocab) << dir;
  ASSERT_EQ(g.logits.size(), g.tokens.size() * static_cast<size_t>(m.config.n_vocab)) << dir;
}

TEST_P(ArchGolden, MatchesLlamaCppBatchTokenByTokenAndChunked) {
  const Golden g = load_golden(dir());
  const auto m = model();
  ASSERT_TRUE(m);
  expect_golden_shape(g, *m, dir());
  if (HasFatalFailure()) return;
  const int n = static_cast<int>(g.tokens.size());
  struct Mode {
    const char* name;
    int chunk, max_chunk;
  };
  for (const Mode& mode :
       {Mode{"batch", 0, std::max(64, n)}, Mode{"token-by-token", 1, 64}, Mode{"chunks of 7, max_chunk 5", 7, 5}}) {
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

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double d = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) d = std::max(d, static_cast<double>(std::abs(a[i] - b[i])));
  return d;
}

// Streaming on every architecture (sliding layers, ALiBi, partial rotary,
// learned sinks): a policy that has evicted nothing by the last token equals
// the dense golden; evicting policies give the same logits in one batch,
// token by token and in uneven chunks (STREAMING.md's prefill contract),
// and differ from dense once they evict.
TEST_P(ArchGolden, StreamingPoliciesPrefillInChunksAsTokenByToken) {
  const Golden g = load_golden(dir());
  const auto m = model();
  ASSERT_TRUE(m);
  expect_golden_shape(g, *m, dir());
  if (HasFatalFailure()) return;
  // Caches that hold all n tokens (sinks + window = n; a window of n - 1
  // besides the current token) evict nothing.
  for (const std::string& spec :
       {"sinks:4:" + std::to_string(g.tokens.size() - 4), "window:" + std::to_string(g.tokens.size() - 1)}) {
    const KvPolicy pol = KvPolicy::parse(spec, 2048).value();
    const Agreement a = compare(g, run(m, g.tokens, 1, 8, pol));
    EXPECT_LE(a.max_dlogsoftmax, kTol) << GetParam() << " " << spec;
  }
  for (const char* spec : {"sinks:4:12", "window:16", "sinks:1:5"}) {
    const KvPolicy pol = KvPolicy::parse(spec, 2048).value();
    const auto tbt = run(m, g.tokens, 1, 64, pol);
    const auto batch = run(m, g.tokens, 0, 64, pol);
    const auto chunks = run(m, g.tokens, 7, 5, pol);
    EXPECT_LE(max_abs_diff(tbt, batch), 2e-5) << GetParam() << " " << spec;
    EXPECT_LE(max_abs_diff(tbt, chunks), 2e-5) << GetParam() << " " << spec;
    // The inspector's separate path (full probability rows) gives the same logits.
    CountingObserver obs;
    EXPECT_LE(max_abs_diff(tbt, run(m, g.tokens, 5, 5, pol, &obs)), 2e-5) << GetParam() << " " << spec;
    EXPECT_EQ(obs.rows, static_cast<int64_t>(g.tokens.size()) * m->config.n_layers * m->config.n_heads);
    // The last row saw evictions: it must not be the dense answer.
    const std::vector<float> last_ours(tbt.end() - g.vocab, tbt.end()),
        last_dense(g.logits.end() - g.vocab, g.logits.end());
    EXPECT_GT(max_abs_diff(last_ours, last_dense), 1e-3) << GetParam() << " " << spec;
  }
}

// A long run in constant memory: after the windows fill, neither pool
// (full layers' sinks + window, sliding layers' own window) grows.
TEST_P(ArchGolden, LongStreamHoldsConstantBlocks) {
  const auto m = model();
  ASSERT_TRUE(m);
  // Pools as tight as the windows allow: the full layers' 4 + 28 tokens in
  // 8 blocks, the sliding layers' window (the model's) in its own pool.
  const int swa = m->config.sliding_window();
  EngineOptions eo;
  eo.kv_blocks = 8;
  eo.sliding_kv_blocks = swa > 0 ? std::max(8, swa / 16 + 4) : 0;
  eo.max_chunk = 4;
  Engine e(m, eo);
  const SeqId id = e.create_sequence(KvPolicy::sinks_window(4, 28)).value();
  // Both windows are full by `filled`; 500 more tokens must not grow either pool.
  const int filled = std::max(100, swa + 64);
  int held_when_full = -1, sliding_when_full = -1;
  std::vector<std::vector<float>> logits;
  int32_t tok = 1;
  for (int i = 0; i < filled + 500; ++i) {
    const BatchItem item{id, std::span<const int32_t>(&tok, 1), false};
    ASSERT_TRUE(e.forward(std::span<const BatchItem>(&item, 1), logits).ok()) << i;
    for (float x : logits[0]) ASSERT_TRUE(std::isfinite(x)) << i;
    tok = static_cast<int32_t>(3 + (i * 131 + 7) % (m->config.n_vocab - 3));
    if (i == filled) {
      held_when_full = e.pool().used_blocks();
      sliding_when_full = e.sliding_pool() ? e.sliding_pool()->used_blocks() : 0;
    }
  }
  EXPECT_EQ(e.pool().used_blocks(), held_when_full);
  EXPECT_EQ(e.pool().peak_used_blocks(), held_when_full);
  if (e.sliding_pool()) {
    EXPECT_EQ(e.sliding_pool()->used_blocks(), sliding_when_full);
    EXPECT_EQ(e.sliding_pool()->peak_used_blocks(), sliding_when_full);
  }
}

// Export then import (what session files and spills do), including the
// sliding layers' window, continues exactly as the original sequence.
TEST_P(ArchGolden, ExportImportContinuesIdentically) {
  const Golden g = load_golden(dir());
  const auto m = model();
  ASSERT_TRUE(m);
  EngineOptions eo;
  eo.kv_blocks = test::dense_blocks(g.tokens.size(), 32);  // a sliding window as long as the text fits
  Engine a(m, eo), b(m, eo);
  const SeqId sa = a.create_sequence(KvPolicy::sinks_window(4, 12)).value();
  std::vector<std::vector<float>> la, lb;
  // Five eighths (40 of 64) before the export: past the window, so the
  // export holds a wrapped ring; the rest after the import.
  const size_t split = g.tokens.size() * 5 / 8, rest = g.tokens.size() - split;
  ASSERT_GE(split, 17u);
  const BatchItem first{sa, std::span<const int32_t>(g.tokens.data(), split), false};
  ASSERT_TRUE(a.forward(std::span<const BatchItem>(&first, 1), la).ok());
  const SeqId sb = b.import_sequence(a.export_sequence(sa)).value();
  const BatchItem rest_a{sa, std::span<const int32_t>(g.tokens.data() + split, rest), true};
  const BatchItem rest_b{sb, std::span<const int32_t>(g.tokens.data() + split, rest), true};
  ASSERT_TRUE(a.forward(std::span<const BatchItem>(&rest_a, 1), la).ok());
  ASSERT_TRUE(b.forward(std::span<const BatchItem>(&rest_b, 1), lb).ok());
  EXPECT_EQ(la[0], lb[0]);
}

// --sink-logit: a very negative virtual sink changes nothing; softmax1
// (logit 0) changes every row.
TEST_P(ArchGolden, VirtualSinkLogit) {
  const Golden g = load_golden(dir());
  const auto m = model();
  ASSERT_TRUE(m);
  auto with_sink = [&](std::optional<float> x) {
    EngineOptions eo;
    eo.kv_blocks = 16;
    eo.sink_logit = x;
    Engine e(m, eo);
    const SeqId id = e.create_sequence(KvPolicy::dense()).value();
    const BatchItem item{id, std::span<const int32_t>(g.tokens.data(), 16), true};
    std::vector<std::vector<float>> l;
    EXPECT_TRUE(e.forward(std::span<const BatchItem>(&item, 1), l).ok());
    return l[0];
  };
  const auto none = with_sink(std::nullopt);
  EXPECT_LE(max_abs_diff(none, with_sink(-1000.0f)), 1e-6);
  const auto one = with_sink(0.0f);
  for (int r = 0; r < 16; ++r) {
    const std::vector<float> a(none.begin() + r * g.vocab, none.begin() + (r + 1) * g.vocab),
        b(one.begin() + r * g.vocab, one.begin() + (r + 1) * g.vocab);
    EXPECT_GT(max_abs_diff(a, b), 1e-4) << GetParam() << " row " << r;
  }
}

// gpt-oss's experts as its released files store them (MXFP4): the MoE path
// on MXFP4 views gives what it gives on the same values decoded to F32
// (the SIMD decode against dequantize_row, through router, top-k and sum).
TEST(ArchMxfp4, GptOssExpertsInMxfp4MatchTheirDecodedValues) {
  const std::string dir = test::shared("golden/arch/gpt-oss");
  const Golden g = load_golden(dir);
  auto mr = load_model({dir + "/model.gguf", ""});
  ASSERT_TRUE(mr.ok()) << mr.error().message;
  auto mx = std::make_shared<Model>(*mr.value()), dec = std::make_shared<Model>(*mr.value());
  auto store = std::make_shared<std::vector<std::vector<uint8_t>>>();
  for (size_t l = 0; l < mx->layers.size(); ++l) {
    for (auto member : {&LayerWeights::exp_gate, &LayerWeights::exp_up, &LayerWeights::exp_down}) {
      auto& qs = mx->layers[l].*member;
      auto& fs = dec->layers[l].*member;
      for (size_t e = 0; e < qs.size(); ++e) {
        const TensorView src = qs[e];
        ASSERT_EQ(src.type, GgmlType::F32);
        std::vector<uint8_t> q(row_bytes(GgmlType::MXFP4, src.ne0) * static_cast<size_t>(src.ne1));
        std::vector<uint8_t> f(static_cast<size_t>(src.ne0 * src.ne1) * 4);
        for (int64_t r = 0; r < src.ne1; ++r) {
          uint8_t* qr = q.data() + static_cast<size_t>(r) * row_bytes(GgmlType::MXFP4, src.ne0);
          quantize_row(GgmlType::MXFP4, src.f32() + r * src.ne0, qr, src.ne0);
          dequantize_row(GgmlType::MXFP4, qr, reinterpret_cast<float*>(f.data()) + r * src.ne0, src.ne0);
        }
        store->push_back(std::move(q));
        qs[e].type = GgmlType::MXFP4;
        qs[e].data = store->back().data();
        store->push_back(std::move(f));
        fs[e].data = store->back().data();
      }
    }
  }
  mx->keep_alive.push_back(store);
  dec->keep_alive.push_back(store);
  const auto a = run(mx, g.tokens, 0, 64), b = run(dec, g.tokens, 0, 64);
  EXPECT_LE(max_abs_diff(a, b), 1e-4);
  // Quantizing the experts moved the logits (the test is not vacuous) but
  // kept them near llama.cpp's F32 ones.
  const Agreement vs_f32 = compare(g, a);
  EXPECT_GT(vs_f32.max_dlogsoftmax, 1e-3);
  std::printf("[mxfp4] vs decoded %.2e, vs F32 experts (llama.cpp) max |d log-softmax| %.3f\n", max_abs_diff(a, b),
              vs_f32.max_dlogsoftmax);
}

// Soft-capping (Gemma 2's choice; no llama.cpp golden ships for it): the
// gemma3 golden model with capped scores and logits keeps every logit inside
// the cap, changes the answer, and streams in chunks, token by token and
// through the inspector's path alike.
TEST(ArchSoftcap, CappedScoresAndLogitsStreamConsistently) {
  auto mr = load_model({test::shared("golden/arch/gemma3/model.gguf"), ""});
  ASSERT_TRUE(mr.ok()) << mr.error().message;
  const Golden g = load_golden(test::shared("golden/arch/gemma3"));
  auto capped = std::make_shared<Model>(*mr.value());
  capped->config.attn_softcap = 0.5f;  // small, so it bends most scores
  capped->config.final_softcap = 2.0f;
  const KvPolicy pol = KvPolicy::sinks_window(4, 12);
  const auto tbt = run(capped, g.tokens, 1, 64, pol);
  for (float x : tbt) ASSERT_LT(std::abs(x), 2.0f);
  EXPECT_LE(max_abs_diff(tbt, run(capped, g.tokens, 7, 5, pol)), 2e-5);
  CountingObserver obs;
  EXPECT_LE(max_abs_diff(tbt, run(capped, g.tokens, 5, 5, pol, &obs)), 2e-5);
  // Only the score cap (logits uncapped) still moves the answer.
  auto scores_only = std::make_shared<Model>(*mr.value());
  scores_only->config.attn_softcap = 0.5f;
  EXPECT_GT(max_abs_diff(run(scores_only, g.tokens, 1, 64, pol), run(mr.value(), g.tokens, 1, 64, pol)), 1e-2);
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
