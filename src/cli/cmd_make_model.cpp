// make-model: random-weight GGUF files with the shapes of real models, for
// speed and memory measurements (their outputs are meaningless).
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>

#include "cli/commands.h"
#include "format/gguf_writer.h"

namespace ss::cli {

namespace {

struct Shape {
  int dim, hidden, layers, heads, kv_heads, vocab, context;
  float rope_base;
};

const std::map<std::string, Shape>& shapes() {
  static const std::map<std::string, Shape> s = {
      {"stories15m", {288, 768, 6, 6, 6, 32000, 256, 10000.0f}},
      {"tinyllama-1.1b", {2048, 5632, 22, 32, 4, 32000, 2048, 10000.0f}},
      {"llama-7b", {4096, 11008, 32, 32, 32, 32000, 4096, 10000.0f}},
      {"mistral-7b", {4096, 14336, 32, 32, 8, 32000, 32768, 1000000.0f}},
  };
  return s;
}

uint64_t splitmix64(uint64_t& x) {
  uint64_t z = (x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t name_hash(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

// A SentencePiece-style vocab: <unk> <s> </s>, the 256 byte tokens, then
// filler pieces, so the tokenizer loads and every id decodes.
void write_vocab(GgufWriter& w, int vocab) {
  std::vector<std::string> toks = {"<unk>", "<s>", "</s>"};
  std::vector<int32_t> types = {2, 3, 3};
  char buf[16];
  for (int b = 0; b < 256; ++b) {
    std::snprintf(buf, sizeof buf, "<0x%02X>", b);
    toks.push_back(buf);
    types.push_back(6);
  }
  while (static_cast<int>(toks.size()) < vocab) {
    toks.push_back("\xE2\x96\x81t" + std::to_string(toks.size()));
    types.push_back(1);
  }
  std::vector<float> scores(toks.size());
  for (size_t i = 0; i < scores.size(); ++i) scores[i] = -static_cast<float>(i);
  w.set_string("tokenizer.ggml.model", "llama");
  w.set_strings("tokenizer.ggml.tokens", toks);
  w.set_f32s("tokenizer.ggml.scores", scores);
  w.set_i32s("tokenizer.ggml.token_type", types);
  w.set_u32("tokenizer.ggml.unknown_token_id", 0);
  w.set_u32("tokenizer.ggml.bos_token_id", 1);
  w.set_u32("tokenizer.ggml.eos_token_id", 2);
}

}  // namespace

MakeModelCommand::MakeModelCommand(CLI::App& app) {
  sub_ = app.add_subcommand("make-model", "write a random-weight GGUF with a real architecture's shapes (for speed)");
  std::string names;
  for (const auto& [k, v] : shapes()) names += (names.empty() ? "" : "|") + k;
  sub_->add_option("--shape", shape_, names)->required();
  sub_->add_option("--type", type_,
                   "weight type: f32|f16|bf16|q8_0|q4_0|q4_k|q5_k|q6_k, or q4_k_m (llama.cpp's mix: "
                   "Q4_K, with Q6_K for the output and for attn_v/ffn_down in the layers it gives more bits)")
      ->capture_default_str();
  sub_->add_option("--seed", seed_, "random seed (same seed, same file)")->capture_default_str();
  sub_->add_option("--layers", layers_, "override the layer count (smaller files for tests)");
  sub_->add_option("-o,--output", output_, "output .gguf path")->required();
}

int MakeModelCommand::run() {
  auto it = shapes().find(shape_);
  if (it == shapes().end()) return fail("unknown --shape '" + shape_ + "'");
  Shape s = it->second;
  if (layers_ > 0) s.layers = layers_;
  static const std::map<std::string, GgmlType> types = {
      {"f32", GgmlType::F32},   {"f16", GgmlType::F16},   {"bf16", GgmlType::BF16}, {"q8_0", GgmlType::Q8_0},
      {"q4_0", GgmlType::Q4_0}, {"q4_k", GgmlType::Q4_K}, {"q5_k", GgmlType::Q5_K}, {"q6_k", GgmlType::Q6_K}};
  // q4_k_m: Q4_K everywhere but where llama.cpp's Q4_K_M puts Q6_K.
  const bool k_m = type_ == "q4_k_m";
  auto t = types.find(k_m ? "q4_k" : type_);
  if (t == types.end()) return fail("unknown --type '" + type_ + "'");
  const GgmlType wt = t->second;
  // llama.cpp's use_more_bits: the first and last eighth of the layers and
  // every third one between.
  auto more_bits = [&](int l) { return l < s.layers / 8 || l >= 7 * s.layers / 8 || (l - s.layers / 8) % 3 == 2; };
  auto q6_if = [&](bool more) { return k_m && more ? GgmlType::Q6_K : wt; };

  GgufWriter w;
  const std::string a = "llama";
  w.set_string("general.architecture", a);
  w.set_string("general.name", "sinkstream synthetic " + shape_ + " " + type_ + " seed " + std::to_string(seed_));
  w.set_u32(a + ".context_length", static_cast<uint32_t>(s.context));
  w.set_u32(a + ".embedding_length", static_cast<uint32_t>(s.dim));
  w.set_u32(a + ".block_count", static_cast<uint32_t>(s.layers));
  w.set_u32(a + ".feed_forward_length", static_cast<uint32_t>(s.hidden));
  w.set_u32(a + ".attention.head_count", static_cast<uint32_t>(s.heads));
  w.set_u32(a + ".attention.head_count_kv", static_cast<uint32_t>(s.kv_heads));
  w.set_f32(a + ".attention.layer_norm_rms_epsilon", 1e-5f);
  w.set_f32(a + ".rope.freq_base", s.rope_base);
  write_vocab(w, s.vocab);

  const uint64_t seed = seed_;
  // Uniform weights with variance 1/cols keep activations O(1) through the
  // layers, so no NaN or denormal slows a measurement down.
  auto matrix = [&](const std::string& name, int64_t cols, int64_t rows, GgmlType type) {
    const float amp = std::sqrt(3.0f / static_cast<float>(cols));
    w.add_tensor_rows(name, type, {cols, rows}, [=](int64_t r, uint8_t* dst) {
      thread_local std::vector<float> row;
      row.resize(static_cast<size_t>(cols));
      uint64_t st = seed ^ name_hash(name) ^ (static_cast<uint64_t>(r) * 0x2545F4914F6CDD1Dull);
      for (auto& v : row) v = amp * (static_cast<float>(splitmix64(st) >> 40) / 8388608.0f - 1.0f);
      quantize_row(type, row.data(), dst, cols);
    });
  };
  auto ones = [&](const std::string& name, int64_t n) {
    w.add_tensor_rows(name, GgmlType::F32, {n}, [=](int64_t, uint8_t* dst) {
      const float one = 1.0f;
      for (int64_t i = 0; i < n; ++i) std::memcpy(dst + 4 * i, &one, 4);
    });
  };
  const int64_t D = s.dim, H = s.hidden, V = s.vocab, kvd = static_cast<int64_t>(D / s.heads) * s.kv_heads;
  if (D % type_traits(static_cast<uint32_t>(wt))->block_elems != 0 ||
      H % type_traits(static_cast<uint32_t>(wt))->block_elems != 0)
    return fail("shape " + shape_ + " does not fit " + type_ + " blocks");
  matrix("token_embd.weight", D, V, wt);
  ones("output_norm.weight", D);
  matrix("output.weight", D, V, q6_if(true));
  for (int l = 0; l < s.layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    ones(p + "attn_norm.weight", D);
    matrix(p + "attn_q.weight", D, D, wt);
    matrix(p + "attn_k.weight", D, kvd, wt);
    matrix(p + "attn_v.weight", D, kvd, q6_if(more_bits(l)));
    matrix(p + "attn_output.weight", D, D, wt);
    ones(p + "ffn_norm.weight", D);
    matrix(p + "ffn_gate.weight", D, H, wt);
    matrix(p + "ffn_up.weight", D, H, wt);
    matrix(p + "ffn_down.weight", H, D, q6_if(more_bits(l)));
  }
  if (auto st = w.write(output_); !st.ok()) return fail(st.error().message);
  std::fprintf(stderr, "wrote %s (%s, %s, %d layers)\n", output_.c_str(), shape_.c_str(), type_.c_str(), s.layers);
  return 0;
}

}  // namespace ss::cli
