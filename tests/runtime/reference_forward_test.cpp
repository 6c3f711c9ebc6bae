// The engine against a textbook double-precision forward on random GGUF
// models: llama (interleaved RoPE) and qwen2 (q/k/v bias, rotate-half RoPE),
// every weight type, GQA, tied and separate heads, dense and sinks policies.
#include "kv/positions.h"
#include "model/tokenizer.h"
#include "runtime_helpers.h"
#include "tiny_model.h"

namespace ss {
namespace {

void check(const test::TinySpec& spec, const KvPolicy& pol, double tol) {
  const std::string path =
      test::write_tiny_model(spec, spec.arch + "_" + std::to_string(static_cast<int>(spec.wtype)) + ".gguf");
  auto mr = load_model({path, ""});
  std::remove(path.c_str());
  ASSERT_TRUE(mr.ok()) << mr.error().message;
  const auto m = mr.value();
  EXPECT_EQ(m->config.rotaries[0].neox, spec.arch == "qwen2");
  std::vector<int32_t> toks;
  for (int i = 0; i < 30; ++i) toks.push_back((i * 37 + 11) % spec.vocab);
  std::vector<std::vector<int>> visible;
  std::vector<std::vector<int64_t>> key_pos;
  std::vector<int64_t> qpos;
  for (int t = 0; t < static_cast<int>(toks.size()); ++t) {
    std::vector<int> vis;
    std::vector<int64_t> kp;
    for (int u = 0; u <= t; ++u)
      if (pol.visible(u, t)) {
        vis.push_back(u);
        kp.push_back(cache_position(pol, u, t));
      }
    visible.push_back(vis);
    key_pos.push_back(kp);
    qpos.push_back(query_cache_position(pol, t));
  }
  const auto ref = test::reference_forward(*m, toks, visible, key_pos, qpos);
  EngineOptions eo;
  eo.max_chunk = 8;
  eo.threads = 2;
  Engine e(m, eo);
  const SeqId id = e.create_sequence(pol).value();
  std::vector<std::vector<float>> logits;
  const BatchItem item{id, toks, true};
  ASSERT_TRUE(e.forward(std::span<const BatchItem>(&item, 1), logits).ok());
  double worst = 0;
  for (size_t t = 0; t < toks.size(); ++t)
    for (int v = 0; v < spec.vocab; ++v)
      worst = std::max(worst, std::fabs(logits[0][t * spec.vocab + v] - ref[t][static_cast<size_t>(v)]));
  EXPECT_LE(worst, tol) << spec.arch << " type " << static_cast<int>(spec.wtype) << " " << pol.name();
}

TEST(ReferenceForward, LlamaAllWeightTypes) {
  for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q8_0, GgmlType::Q4_0}) {
    test::TinySpec s;
    s.wtype = t;
    s.tied = t == GgmlType::F16;
    check(s, KvPolicy::dense(), 1e-4);
    check(s, KvPolicy::sinks_window(2, 9), 1e-4);
  }
}

TEST(ReferenceForward, LlamaKQuants) {
  // K-quant rows hold whole 256-element super-blocks.
  for (GgmlType t : {GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K}) {
    test::TinySpec s;
    s.wtype = t;
    s.dim = 256;
    s.hidden = 512;
    s.heads = 8;
    s.kv_heads = 2;
    s.layers = 1;
    s.weight_std = 0.3f * std::sqrt(32.0f / 256.0f);  // the 32-wide models' activation scale
    check(s, KvPolicy::dense(), 1e-4);
    check(s, KvPolicy::sinks_window(2, 9), 1e-4);
  }
}

TEST(ReferenceForward, Qwen2WithBiasAndNeoxRope) {
  test::TinySpec s;
  s.arch = "qwen2";
  s.kv_heads = 1;
  check(s, KvPolicy::dense(), 1e-4);
  check(s, KvPolicy::sinks_window(4, 5), 1e-4);
  check(s, KvPolicy::sinks_window(0, 7), 1e-4);
}

TEST(ReferenceForward, MultiHeadAttentionUnderEveryWindow) {
  // One KV head per query head (Pythia, Phi, MPT, Llama-7B): windows past
  // the prompt, shorter than it with and without sinks, and of two tokens.
  // Heads of 8, and of 16 and 48 (prefill scores them in query tiles).
  for (const auto& [dim, heads] : {std::pair{32, 4}, std::pair{64, 4}, std::pair{96, 2}}) {
    test::TinySpec s;
    s.dim = dim;
    s.heads = s.kv_heads = heads;
    s.weight_std = 0.3f * std::sqrt(32.0f / static_cast<float>(dim));
    for (const auto& pol : {KvPolicy::dense(), KvPolicy::sinks_window(2, 9), KvPolicy::sinks_window(4, 5),
                            KvPolicy::sinks_window(0, 7), KvPolicy::sinks_window(1, 2)})
      check(s, pol, 1e-4);
  }
}

TEST(ReferenceForward, MistralLoadsAsLlamaFamily) {
  test::TinySpec s;
  s.arch = "mistral";
  s.heads = 8;
  s.kv_heads = 2;
  check(s, KvPolicy::dense(), 1e-4);
}

TEST(ReferenceForward, Gpt2VocabFromGgufTokenizes) {
  test::TinySpec s;
  const std::string path = test::write_tiny_model(s, "vocab.gguf");
  auto m = load_model({path, ""});
  std::remove(path.c_str());
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_EQ(m.value()->vocab.kind, VocabKind::ByteLevel);
  const Tokenizer tok(m.value()->vocab);
  const auto ids = tok.encode("hello world", false);
  ASSERT_GE(ids.size(), 3u);
  EXPECT_EQ(m.value()->vocab.pieces[static_cast<size_t>(ids[0])], "hello");
  EXPECT_EQ(tok.decode(ids), "hello world");
}

}  // namespace
}  // namespace ss
