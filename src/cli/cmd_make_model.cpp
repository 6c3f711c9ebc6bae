// make-model: random-weight GGUF files with the shapes of real models, for
// speed and memory measurements (their outputs are meaningless).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <thread>

#include "cli/commands.h"
#include "format/gguf_writer.h"
#include "util/thread_count.h"
#include "util/thread_pool.h"

namespace ss::cli {

namespace {

// A real model's dimensions and its family's choices (llama.cpp's keys and
// tensor names for that general.architecture).
struct Shape {
  std::string arch;
  int dim, hidden, layers, heads, kv_heads, vocab, context;
  float rope_base;
  int head_dim = 0;   // 0: dim / heads
  int rope_dims = 0;  // 0: head_dim (partial rotary otherwise)
  int swa = 0;        // sliding window of the sliding layers
  int experts = 0, experts_used = 0;
  float yarn_factor = 0;  // gpt-oss: YaRN over yarn_orig tokens
  int yarn_orig = 0;
};

Shape llama(int dim, int hidden, int layers, int heads, int kv, int vocab, int ctx, float base) {
  return {"llama", dim, hidden, layers, heads, kv, vocab, ctx, base};
}

const std::map<std::string, Shape>& shapes() {
  static const std::map<std::string, Shape> s = [] {
    std::map<std::string, Shape> m = {
        {"stories15m", llama(288, 768, 6, 6, 6, 32000, 256, 10000.0f)},
        {"tinyllama-1.1b", llama(2048, 5632, 22, 32, 4, 32000, 2048, 10000.0f)},
        // Llama's layout at a test's size, with rows K-quants fit (256 wide).
        {"llama-tiny", llama(256, 768, 8, 4, 2, 512, 2048, 10000.0f)},
        {"llama-7b", llama(4096, 11008, 32, 32, 32, 32000, 4096, 10000.0f)},
        {"mistral-7b", llama(4096, 14336, 32, 32, 8, 32000, 32768, 1000000.0f)},
    };
    Shape g{"gpt-oss", 2880, 2880, 24, 64, 8, 201088, 131072, 150000.0f};
    g.head_dim = 64, g.swa = 128, g.experts = 32, g.experts_used = 4, g.yarn_factor = 32, g.yarn_orig = 4096;
    m["gpt-oss-20b"] = g;
    // gpt-oss's layout at a test's size (the 20B file is 12 GiB).
    Shape gt{"gpt-oss", 256, 256, 2, 8, 2, 512, 4096, 150000.0f};
    gt.head_dim = 32, gt.swa = 16, gt.experts = 8, gt.experts_used = 2, gt.yarn_factor = 32, gt.yarn_orig = 4096;
    m["gpt-oss-tiny"] = gt;
    Shape ge{"gemma3", 1152, 6912, 26, 4, 1, 262144, 32768, 1000000.0f};
    ge.head_dim = 256, ge.swa = 512;
    m["gemma3-1b"] = ge;
    Shape g2{"gemma2", 2304, 9216, 26, 8, 4, 256000, 8192, 10000.0f};
    g2.head_dim = 256, g2.swa = 4096;
    m["gemma2-2b"] = g2;
    Shape q{"qwen3", 1024, 3072, 28, 16, 8, 151936, 40960, 1000000.0f};
    q.head_dim = 128;
    m["qwen3-0.6b"] = q;
    Shape p{"gptneox", 768, 3072, 12, 12, 12, 50304, 2048, 10000.0f};
    p.rope_dims = 16;
    m["pythia-160m"] = p;
    Shape ph{"phi2", 2560, 10240, 32, 32, 32, 51200, 2048, 10000.0f};
    ph.rope_dims = 32;
    m["phi-2"] = ph;
    m["mpt-7b"] = Shape{"mpt", 4096, 16384, 32, 32, 32, 50432, 2048, 10000.0f};
    return m;
  }();
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
  sub_ =
      Flags::subcommand(app, "make-model", "write a random-weight GGUF with a real architecture's shapes (for speed)");
  std::string names;
  for (const auto& [k, v] : shapes()) names += (names.empty() ? "" : "|") + k;
  sub_.add("--shape", shape_, names).required();
  sub_.add("--type", type_,
           "weight type: f32|f16|bf16|q8_0|q4_0|q4_k|q5_k|q6_k|mxfp4, or q4_k_m / q5_k_m (llama.cpp's mixes: "
           "Q4_K / Q5_K, with Q6_K for the output and for attn_v/ffn_down in the layers it gives more bits)")
      .show_default();
  sub_.add("--seed", seed_, "random seed (same seed, same file)").show_default();
  sub_.add("--layers", layers_, "override the layer count (smaller files for tests)");
  sub_.add("--vocab", vocab_, "override the vocabulary size (smaller files for tests)");
  sub_.add("--expert-type", expert_type_, "MoE expert weight type (gpt-oss files ship MXFP4)").show_default();
  sub_.add("-o,--output", output_, "output .gguf path").required();
}

int MakeModelCommand::run() {
  auto it = shapes().find(shape_);
  if (it == shapes().end()) return fail("unknown --shape '" + shape_ + "'");
  Shape s = it->second;
  if (layers_ > 0) s.layers = layers_;
  if (vocab_ > 0) s.vocab = std::max(vocab_, 259);  // room for <unk> <s> </s> and the byte tokens
  static const std::map<std::string, GgmlType> types = {
      {"f32", GgmlType::F32},   {"f16", GgmlType::F16},   {"bf16", GgmlType::BF16},
      {"q8_0", GgmlType::Q8_0}, {"q4_0", GgmlType::Q4_0}, {"q4_k", GgmlType::Q4_K},
      {"q5_k", GgmlType::Q5_K}, {"q6_k", GgmlType::Q6_K}, {"mxfp4", GgmlType::MXFP4}};
  // q4_k_m / q5_k_m: Q4_K / Q5_K everywhere but where llama.cpp's mix puts Q6_K.
  const bool k_m = type_ == "q4_k_m" || type_ == "q5_k_m";
  auto t = types.find(k_m ? type_.substr(0, 4) : type_);
  if (t == types.end()) return fail("unknown --type '" + type_ + "'");
  auto et = types.find(expert_type_);
  if (et == types.end()) return fail("unknown --expert-type '" + expert_type_ + "'");
  const GgmlType wt = t->second, expert_t = et->second;
  // llama.cpp's use_more_bits: the first and last eighth of the layers and
  // every third one between.
  auto more_bits = [&](int l) { return l < s.layers / 8 || l >= 7 * s.layers / 8 || (l - s.layers / 8) % 3 == 2; };
  auto q6_if = [&](bool more) { return k_m && more ? GgmlType::Q6_K : wt; };

  const std::string& a = s.arch;
  const bool layer_norm = a == "gptneox" || a == "phi2" || a == "mpt";
  const bool norm_bias = a == "gptneox" || a == "phi2";
  const bool fused_qkv = a == "gptneox" || a == "mpt";
  const bool attn_bias = a == "gptneox" || a == "phi2" || a == "gpt-oss";
  const bool qk_norm = a == "qwen3" || a == "gemma3";
  const bool gemma = a == "gemma2" || a == "gemma3";
  const bool tied = gemma || a == "mpt";
  const bool gated = a == "llama" || a == "qwen3" || gemma;
  const bool ffn_bias = a == "gptneox" || a == "phi2";
  const int hd = s.head_dim > 0 ? s.head_dim : s.dim / s.heads;

  GgufWriter w;
  w.set_string("general.architecture", a);
  w.set_string("general.name", "sinkstream synthetic " + shape_ + " " + type_ + " seed " + std::to_string(seed_));
  auto u32 = [&](const std::string& k, int64_t v) { w.set_u32(a + "." + k, static_cast<uint32_t>(v)); };
  u32("context_length", s.context);
  u32("embedding_length", s.dim);
  u32("block_count", s.layers);
  u32("feed_forward_length", s.hidden);
  u32("attention.head_count", s.heads);
  u32("attention.head_count_kv", s.kv_heads);
  if (s.head_dim > 0) {
    u32("attention.key_length", hd);
    u32("attention.value_length", hd);
  }
  if (s.rope_dims > 0) u32("rope.dimension_count", s.rope_dims);
  w.set_f32(a + (layer_norm ? ".attention.layer_norm_epsilon" : ".attention.layer_norm_rms_epsilon"), 1e-5f);
  if (a != "mpt") w.set_f32(a + ".rope.freq_base", s.rope_base);
  if (a == "mpt") w.set_f32(a + ".attention.max_alibi_bias", 8.0f);
  if (a == "gptneox") w.set_bool(a + ".use_parallel_residual", true);
  if (a == "gemma2") {
    w.set_f32(a + ".attn_logit_softcapping", 50.0f);
    w.set_f32(a + ".final_logit_softcapping", 30.0f);
  }
  if (s.swa > 0) u32("attention.sliding_window", s.swa);
  if (s.experts > 0) {
    u32("expert_count", s.experts);
    u32("expert_used_count", s.experts_used);
    u32("expert_feed_forward_length", s.hidden);
  }
  if (s.yarn_factor > 0) {
    w.set_string(a + ".rope.scaling.type", "yarn");
    w.set_f32(a + ".rope.scaling.factor", s.yarn_factor);
    u32("rope.scaling.original_context_length", s.yarn_orig);
  }
  write_vocab(w, s.vocab);

  const uint64_t seed = seed_;
  // Uniform weights with variance 1/cols keep activations O(1) through the
  // layers, so no NaN or denormal slows a measurement down.
  // Rows are generated and quantized on every CPU this process may use
  // (ggml's K-quant scale search is slow); each row's values depend only on
  // its index, so the file is the same for any number of threads.
  auto pool = std::make_shared<ThreadPool>(default_thread_count(CpuUse::LogicalCpus).threads);
  auto matrix = [&](const std::string& name, std::vector<int64_t> ne, GgmlType type, float gain = 1.0f) {
    const int64_t cols = ne[0];
    int64_t rows = 1;
    for (size_t i = 1; i < ne.size(); ++i) rows *= ne[i];
    const float amp = gain * std::sqrt(3.0f / static_cast<float>(cols));
    const size_t rb = row_bytes(type, cols);
    w.add_tensor_fill(name, type, std::move(ne), [=](uint8_t* dst) {
      pool->parallel_for(static_cast<size_t>(rows), [&](size_t b, size_t e) {
        std::vector<float> row(static_cast<size_t>(cols));
        for (size_t r = b; r < e; ++r) {
          uint64_t st = seed ^ name_hash(name) ^ (static_cast<uint64_t>(r) * 0x2545F4914F6CDD1Dull);
          for (auto& v : row) v = amp * (static_cast<float>(splitmix64(st) >> 40) / 8388608.0f - 1.0f);
          quantize_row(type, row.data(), dst + r * rb, cols);
        }
      });
    });
  };
  auto constant = [&](const std::string& name, std::vector<int64_t> ne, float value) {
    const int64_t n = ne[0];
    w.add_tensor_rows(name, GgmlType::F32, std::move(ne), [=](int64_t, uint8_t* dst) {
      for (int64_t i = 0; i < n; ++i) std::memcpy(dst + 4 * i, &value, 4);
    });
  };
  auto norm = [&](const std::string& base, int64_t n, bool bias) {
    constant(base + ".weight", {n}, 1.0f);
    if (bias) constant(base + ".bias", {n}, 0.0f);
  };
  const int64_t D = s.dim, H = s.hidden, V = s.vocab, qd = static_cast<int64_t>(hd) * s.heads,
                kvd = static_cast<int64_t>(hd) * s.kv_heads;
  const auto block = [](GgmlType x) { return type_traits(static_cast<uint32_t>(x))->block_elems; };
  for (int64_t cols : {D, H, qd})
    if (cols % block(wt) != 0 || (s.experts > 0 && cols % block(expert_t) != 0))
      return fail("shape " + shape_ + " does not fit " + type_ + " blocks");
  matrix("token_embd.weight", {D, V}, wt);
  norm("output_norm", D, norm_bias);
  if (!tied) matrix("output.weight", {D, V}, q6_if(true));
  if (a == "phi2") constant("output.bias", {V}, 0.0f);
  for (int l = 0; l < s.layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    norm(p + "attn_norm", D, norm_bias);
    if (fused_qkv) {
      matrix(p + "attn_qkv.weight", {D, qd + 2 * kvd}, wt);
      if (attn_bias) constant(p + "attn_qkv.bias", {qd + 2 * kvd}, 0.0f);
    } else {
      matrix(p + "attn_q.weight", {D, qd}, wt);
      matrix(p + "attn_k.weight", {D, kvd}, wt);
      matrix(p + "attn_v.weight", {D, kvd}, q6_if(more_bits(l)));
      if (attn_bias)
        for (const char* n : {"attn_q", "attn_k", "attn_v"})
          constant(p + n + ".bias", {std::string(n) == "attn_q" ? qd : kvd}, 0.0f);
    }
    matrix(p + "attn_output.weight", {qd, D}, wt);
    if (attn_bias) constant(p + "attn_output.bias", {D}, 0.0f);
    if (qk_norm) {
      norm(p + "attn_q_norm", hd, false);
      norm(p + "attn_k_norm", hd, false);
    }
    if (gemma) {
      norm(p + "post_attention_norm", D, false);
      norm(p + "post_ffw_norm", D, false);
    }
    if (a == "gpt-oss") {
      constant(p + "attn_sinks.weight", {s.heads}, 0.0f);
      norm(p + "post_attention_norm", D, false);
      matrix(p + "ffn_gate_inp.weight", {D, s.experts}, GgmlType::F32);
      constant(p + "ffn_gate_inp.bias", {s.experts}, 0.0f);
      matrix(p + "ffn_gate_exps.weight", {D, H, s.experts}, expert_t);
      matrix(p + "ffn_up_exps.weight", {D, H, s.experts}, expert_t);
      matrix(p + "ffn_down_exps.weight", {H, D, s.experts}, expert_t);
      constant(p + "ffn_gate_exps.bias", {H, s.experts}, 0.0f);
      constant(p + "ffn_up_exps.bias", {H, s.experts}, 0.0f);
      constant(p + "ffn_down_exps.bias", {D, s.experts}, 0.0f);
      continue;
    }
    if (a != "phi2") norm(p + "ffn_norm", D, norm_bias);
    if (gated) matrix(p + "ffn_gate.weight", {D, H}, wt);
    matrix(p + "ffn_up.weight", {D, H}, wt);
    matrix(p + "ffn_down.weight", {H, D}, q6_if(more_bits(l)));
    if (ffn_bias) {
      constant(p + "ffn_up.bias", {H}, 0.0f);
      constant(p + "ffn_down.bias", {D}, 0.0f);
    }
  }
  if (auto st = w.write(output_); !st.ok()) return fail(st.error().message);
  std::fprintf(stderr, "wrote %s (%s, %s, %d layers)\n", output_.c_str(), shape_.c_str(), type_.c_str(), s.layers);
  return 0;
}

}  // namespace ss::cli
