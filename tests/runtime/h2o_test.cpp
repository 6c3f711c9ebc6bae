// H2O with sinks in the engine (docs/H2O.md): with H = 0 it is exactly the
// position-only policies (sinks:S:R, window:R) on the bundled models and on
// every architecture of golden/arch (ALiBi, learned sinks, sliding layers,
// partial rotary); chunked prefill equals feeding one token at a time (same
// logits, same kept tokens in every layer and head); the pool's blocks stay
// constant over a long stream; bad combinations are errors.
#include <cmath>

#include "runtime/scoring.h"
#include "runtime_helpers.h"

namespace ss {
namespace {

KvPolicy policy(const std::string& spec) { return KvPolicy::parse(spec, 512).value(); }

std::vector<double> nll(std::shared_ptr<const Model> m, const std::vector<int32_t>& tokens, const std::string& spec) {
  EngineOptions eo;
  eo.threads = 2;
  const auto mode = StreamMode::cached(policy(spec));
  size_kv_pools(eo, m->config, mode.policy, static_cast<int64_t>(tokens.size()));
  Engine e(m, eo);
  auto r = score_tokens(e, tokens, mode);
  EXPECT_TRUE(r.ok()) << spec << ": " << (r.ok() ? "" : r.error().message);
  return r.ok() ? r.value() : std::vector<double>{};
}

double worst_diff(const std::vector<double>& a, const std::vector<double>& b) {
  EXPECT_EQ(a.size(), b.size());
  double w = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) w = std::max(w, std::fabs(a[i] - b[i]));
  return w;
}

// The bound: the NLL (mean over the golden tokens) within 1e-5; per
// token within 1e-4 (H2O's two-pass softmax and the fused online one round
// differently; float32 resolution of an NLL near 10 is ~1e-6).
void expect_same_nll(const std::vector<double>& a, const std::vector<double>& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size());
  double sa = 0, sb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    sa += a[i];
    sb += b[i];
  }
  EXPECT_LE(std::fabs(sa - sb) / static_cast<double>(a.size()), 1e-5) << what;
  EXPECT_LE(worst_diff(a, b), 1e-4) << what;
}

TEST(H2o, ZeroHeavyHittersIsSinksOrWindowOnTheBundledModels) {
  for (const char* which : {"stories260K", "tinystories-656k"}) {
    auto m = std::string(which) == "stories260K" ? test::stories_gguf() : test::ts656k();
    ASSERT_TRUE(m);
    const auto tokens = test::read_ids(test::shared(std::string("golden/") + which + "/tokens.txt"));
    expect_same_nll(nll(m, tokens, "h2o:4:60:0"), nll(m, tokens, "sinks:4:60"), std::string(which) + " sinks");
    expect_same_nll(nll(m, tokens, "h2o:0:64:0"), nll(m, tokens, "window:64"), std::string(which) + " window");
  }
}

constexpr auto feed = test::feed_chunks;

float worst_logit_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  float w = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) w = std::max(w, std::fabs(a[i] - b[i]));
  return w;
}

TEST(H2o, ZeroHeavyHittersIsSinksOnEveryArchitecture) {
  for (const char* arch : {"llama", "qwen3", "gemma3", "gptneox", "phi2", "mpt", "gpt-oss"}) {
    auto m = test::model_at(std::string("golden/arch/") + arch + "/model.gguf");
    ASSERT_TRUE(m) << arch;
    std::vector<int32_t> toks(120);
    for (size_t i = 0; i < toks.size(); ++i) toks[i] = static_cast<int32_t>((i * 37 + 11) % m->config.n_vocab);
    EngineOptions eo;
    eo.kv_blocks = 64;
    Engine a(m, eo), b(m, eo);
    const auto la = feed(a, a.create_sequence(policy("h2o:4:20:0")).value(), toks, 16);
    const auto lb = feed(b, b.create_sequence(policy("sinks:4:20")).value(), toks, 16);
    EXPECT_LE(worst_logit_diff(la, lb), 1e-4) << arch;
  }
}

// The tokens each (layer, KV head) lane keeps, in lane order.
std::vector<std::vector<int64_t>> kept(const Engine& e, SeqId id) {
  const auto& c = e.config();
  std::vector<std::vector<int64_t>> out;
  for (int i = 0; i < c.full_layers() * c.n_kv_heads; ++i) {
    out.emplace_back();
    for (const auto& en : e.sequence(id)->lane(i).entries()) out.back().push_back(en.text);
  }
  return out;
}

TEST(H2o, ChunkedPrefillEqualsTokenByToken) {
  for (auto m : {test::stories_gguf(), test::ts656k()}) {
    ASSERT_TRUE(m);
    const auto golden = test::golden_tokens(*m);
    const std::vector<int32_t> prompt(golden.begin(), golden.begin() + 200);
    for (const char* spec : {"h2o:4:20:12", "h2o:0:16:16"}) {
      EngineOptions eo;
      eo.kv_blocks = 64;
      Engine ref(m, eo);
      const SeqId rid = ref.create_sequence(policy(spec)).value();
      const auto want = feed(ref, rid, prompt, 1);
      const auto want_kept = kept(ref, rid);
      // Heavy hitters differ between heads: the test means something.
      bool heads_differ = false;
      for (const auto& k : want_kept) heads_differ |= k != want_kept[0];
      EXPECT_TRUE(heads_differ) << spec;
      for (int chunk : {7, 64}) {
        Engine e(m, eo);
        const SeqId id = e.create_sequence(policy(spec)).value();
        EXPECT_LE(worst_logit_diff(feed(e, id, prompt, chunk), want), 1e-4) << spec << " chunk " << chunk;
        EXPECT_EQ(kept(e, id), want_kept) << spec << " chunk " << chunk;
      }
    }
  }
}

TEST(H2o, BlocksStayConstantOverALongStream) {
  auto m = test::ts656k();
  ASSERT_TRUE(m);
  const auto pol = policy("h2o:4:40:20");
  EngineOptions eo;
  size_kv_pools(eo, m->config, pol, 0);
  Engine e(m, eo);
  const SeqId id = e.create_sequence(pol).value();
  std::vector<int32_t> toks(64);
  int used_at_capacity = -1;
  for (int round = 0; round < 40; ++round) {
    for (size_t i = 0; i < toks.size(); ++i) toks[i] = static_cast<int32_t>((round * 131 + i * 17) % m->config.n_vocab);
    feed(e, id, toks, 64);
    if (round == 2) used_at_capacity = e.pool().used_blocks();
    if (round > 2) {
      ASSERT_EQ(e.pool().used_blocks(), used_at_capacity) << round;
    }
    for (int i = 0; i < m->config.full_layers() * m->config.n_kv_heads; ++i)
      ASSERT_EQ(static_cast<int64_t>(e.sequence(id)->lane(i).entries().size()), pol.capacity());
  }
  EXPECT_LE(used_at_capacity, blocks_per_sequence(pol, 0, eo.block_tokens, eo.max_chunk));
}

TEST(H2o, BadCombinationsAreErrors) {
  auto m = test::stories_gguf();  // 8-wide heads: a Q8_0 block would span heads
  EngineOptions eo;
  eo.kv_type = GgmlType::Q8_0;
  Engine e(m, eo);
  EXPECT_FALSE(e.create_sequence(policy("h2o:4:20:8")).ok());
  EXPECT_TRUE(e.create_sequence(policy("sinks:4:20")).ok());
  eo.kv_type = GgmlType::F16;
  Engine f(m, eo);
  const SeqId id = f.create_sequence(policy("h2o:4:20:8")).value();
  EXPECT_FALSE(f.adopt_sinks(id, {}).ok());
  SequenceState st;
  st.policy = policy("h2o:4:20:8");
  EXPECT_FALSE(f.import_sequence(st).ok());
}

}  // namespace
}  // namespace ss
