#pragma once
// Builds small random-weight GGUF models with the GGUF writer, and a textbook
// dense forward pass (double precision, no cache) to check the engine against.
#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "format/gguf_writer.h"
#include "model/model.h"
#include "ops/matmul.h"
#include "test_paths.h"

namespace ss::test {

struct TinySpec {
  std::string arch = "llama";
  int dim = 32, hidden = 64, layers = 2, heads = 4, kv_heads = 2, vocab = 300;
  GgmlType wtype = GgmlType::F32;
  bool tied = false;
  uint32_t seed = 1;
  float weight_std = 0.3f;  // scale with 1/sqrt(dim) to keep activations comparable across sizes
};

// gpt2-style vocab: 256 byte symbols, a few merges, then filler tokens.
inline void write_gpt2_vocab(GgufWriter& w, int vocab) {
  std::vector<std::string> toks;
  int extra = 0;
  for (int b = 0; b < 256; ++b) {
    uint32_t cp =
        ((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF)) ? b : 256 + extra++;
    std::string s;
    if (cp < 0x80)
      s += static_cast<char>(cp);
    else if (cp < 0x800) {
      s += static_cast<char>(0xC0 | (cp >> 6));
      s += static_cast<char>(0x80 | (cp & 0x3F));
    }
    toks.push_back(s);
  }
  const std::vector<std::string> merges = {"h e", "l l", "he ll", "hell o", "\xC4\xA0 w", "\xC4\xA0w o"};
  for (const auto& m : merges) toks.push_back(m.substr(0, m.find(' ')) + m.substr(m.find(' ') + 1));
  while (static_cast<int>(toks.size()) < vocab - 1) toks.push_back("<filler" + std::to_string(toks.size()) + ">");
  toks.push_back("<|endoftext|>");
  std::vector<int32_t> types(toks.size(), 1);
  types.back() = 3;
  w.set_string("tokenizer.ggml.model", "gpt2");
  w.set_string("tokenizer.ggml.pre", "qwen2");
  w.set_strings("tokenizer.ggml.tokens", toks);
  w.set_i32s("tokenizer.ggml.token_type", types);
  w.set_strings("tokenizer.ggml.merges", merges);
  w.set_u32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(toks.size() - 1));
  w.set_u32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(toks.size() - 1));
}

inline std::string write_tiny_model(const TinySpec& s, const std::string& name) {
  std::mt19937 rng(s.seed);
  std::normal_distribution<float> nd(0.0f, s.weight_std);
  auto rnd = [&](size_t n) {
    std::vector<float> v(n);
    for (auto& x : v) x = nd(rng);
    return v;
  };
  auto ones = [&](size_t n) {
    std::vector<float> v(n);
    for (auto& x : v) x = 1.0f + 0.1f * nd(rng);
    return v;
  };
  GgufWriter w;
  const std::string a = s.arch;
  w.set_string("general.architecture", a);
  w.set_u32(a + ".context_length", 64);
  w.set_u32(a + ".embedding_length", static_cast<uint32_t>(s.dim));
  w.set_u32(a + ".block_count", static_cast<uint32_t>(s.layers));
  w.set_u32(a + ".feed_forward_length", static_cast<uint32_t>(s.hidden));
  w.set_u32(a + ".attention.head_count", static_cast<uint32_t>(s.heads));
  w.set_u32(a + ".attention.head_count_kv", static_cast<uint32_t>(s.kv_heads));
  w.set_f32(a + ".attention.layer_norm_rms_epsilon", 1e-5f);
  w.set_f32(a + ".rope.freq_base", 10000.0f);
  write_gpt2_vocab(w, s.vocab);
  const int64_t hd = s.dim / s.heads, kvd = hd * s.kv_heads;
  const int64_t V = s.vocab, D = s.dim, H = s.hidden;
  w.add_tensor("token_embd.weight", s.wtype, {D, V}, rnd(static_cast<size_t>(V * D)));
  w.add_tensor("output_norm.weight", GgmlType::F32, {D}, ones(static_cast<size_t>(D)));
  if (!s.tied) w.add_tensor("output.weight", s.wtype, {D, V}, rnd(static_cast<size_t>(V * D)));
  for (int l = 0; l < s.layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    w.add_tensor(p + "attn_norm.weight", GgmlType::F32, {D}, ones(static_cast<size_t>(D)));
    w.add_tensor(p + "attn_q.weight", s.wtype, {D, D}, rnd(static_cast<size_t>(D * D)));
    w.add_tensor(p + "attn_k.weight", s.wtype, {D, kvd}, rnd(static_cast<size_t>(D * kvd)));
    w.add_tensor(p + "attn_v.weight", s.wtype, {D, kvd}, rnd(static_cast<size_t>(D * kvd)));
    w.add_tensor(p + "attn_output.weight", s.wtype, {D, D}, rnd(static_cast<size_t>(D * D)));
    if (a == "qwen2") {
      w.add_tensor(p + "attn_q.bias", GgmlType::F32, {D}, rnd(static_cast<size_t>(D)));
      w.add_tensor(p + "attn_k.bias", GgmlType::F32, {kvd}, rnd(static_cast<size_t>(kvd)));
      w.add_tensor(p + "attn_v.bias", GgmlType::F32, {kvd}, rnd(static_cast<size_t>(kvd)));
    }
    w.add_tensor(p + "ffn_norm.weight", GgmlType::F32, {D}, ones(static_cast<size_t>(D)));
    w.add_tensor(p + "ffn_gate.weight", s.wtype, {D, H}, rnd(static_cast<size_t>(D * H)));
    w.add_tensor(p + "ffn_up.weight", s.wtype, {D, H}, rnd(static_cast<size_t>(D * H)));
    w.add_tensor(p + "ffn_down.weight", s.wtype, {H, D}, rnd(static_cast<size_t>(H * D)));
  }
  const std::string path = temp_path(name);
  EXPECT_TRUE(w.write(path).ok());
  return path;
}

// Textbook forward over the whole sequence (double precision); returns
// logits for every position. Positions are given per token (for the sinks
// contract) and keys visible to query i are listed in `visible[i]`.
inline std::vector<std::vector<double>> reference_forward(
    const Model& m, const std::vector<int32_t>& toks, const std::vector<std::vector<int>>& visible,
    const std::vector<std::vector<int64_t>>& key_pos, const std::vector<int64_t>& query_pos,
    const std::function<void(int, size_t, int, const std::vector<double>&)>& on_probs = {}) {
  const auto& c = m.config;
  const int D = c.dim, hd = c.head_dim, nh = c.n_heads, nkv = c.n_kv_heads, H = c.hidden_dim;
  const size_t T = toks.size();
  auto mat = [&](const TensorView& w) {
    std::vector<double> out(static_cast<size_t>(w.ne0 * w.ne1));
    std::vector<float> row(static_cast<size_t>(w.ne0));
    for (int64_t r = 0; r < w.ne1; ++r) {
      dequantize_row(w.type, w.row(r), row.data(), w.ne0);
      for (int64_t k = 0; k < w.ne0; ++k) out[static_cast<size_t>(r * w.ne0 + k)] = row[static_cast<size_t>(k)];
    }
    return out;
  };
  auto mv = [](const std::vector<double>& W, const std::vector<double>& x, size_t rows) {
    std::vector<double> y(rows, 0.0);
    const size_t cols = x.size();
    for (size_t r = 0; r < rows; ++r)
      for (size_t k = 0; k < cols; ++k) y[r] += W[r * cols + k] * x[k];
    return y;
  };
  auto rms = [&](const std::vector<double>& x, const float* w) {
    double ss = 0;
    for (double v : x) ss += v * v;
    const double sc = 1.0 / std::sqrt(ss / static_cast<double>(x.size()) + c.norm_eps);
    std::vector<double> y(x.size());
    for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * sc * w[i];
    return y;
  };
  auto rope = [&](std::vector<double>& v, int heads, int64_t pos) {
    const RotaryConfig& rc = c.rotaries[0];
    const int half = rc.dim / 2;
    for (int h = 0; h < heads; ++h)
      for (int i = 0; i < half; ++i) {
        const double theta = static_cast<double>(pos) * std::pow(rc.base, -2.0 * i / rc.dim);
        const int a = rc.neox ? i : 2 * i;
        const int b = rc.neox ? i + half : 2 * i + 1;
        const double x0 = v[static_cast<size_t>(h * hd + a)], x1 = v[static_cast<size_t>(h * hd + b)];
        v[static_cast<size_t>(h * hd + a)] = x0 * std::cos(theta) - x1 * std::sin(theta);
        v[static_cast<size_t>(h * hd + b)] = x0 * std::sin(theta) + x1 * std::cos(theta);
      }
  };
  const auto emb = mat(m.tok_embd), out_w = mat(m.output);
  std::vector<std::vector<double>> x(T, std::vector<double>(static_cast<size_t>(D)));
  for (size_t t = 0; t < T; ++t)
    for (int d = 0; d < D; ++d) x[t][static_cast<size_t>(d)] = emb[static_cast<size_t>(toks[t]) * D + d];
  int layer_index = -1;
  for (const auto& L : m.layers) {
    ++layer_index;
    const auto wq = mat(L.wq), wk = mat(L.wk), wv = mat(L.wv), wo = mat(L.wo), wg = mat(L.w_gate), wu = mat(L.w_up),
               wd = mat(L.w_down);
    std::vector<std::vector<double>> q(T), k(T), v(T);
    for (size_t t = 0; t < T; ++t) {
      const auto xb = rms(x[t], L.attn_norm.f32());
      q[t] = mv(wq, xb, static_cast<size_t>(nh * hd));
      k[t] = mv(wk, xb, static_cast<size_t>(nkv * hd));
      v[t] = mv(wv, xb, static_cast<size_t>(nkv * hd));
      if (!L.bq.empty()) {
        for (size_t i = 0; i < q[t].size(); ++i) q[t][i] += L.bq.f32()[i];
        for (size_t i = 0; i < k[t].size(); ++i) k[t][i] += L.bk.f32()[i], v[t][i] += L.bv.f32()[i];
      }
    }
    std::vector<std::vector<double>> nx = x;
    for (size_t t = 0; t < T; ++t) {
      auto qt = q[t];
      rope(qt, nh, query_pos[t]);
      std::vector<double> att(static_cast<size_t>(nh * hd), 0.0);
      for (int h = 0; h < nh; ++h) {
        const int kvh = h / (nh / nkv);
        std::vector<double> sc;
        for (size_t j = 0; j < visible[t].size(); ++j) {
          auto kj = k[static_cast<size_t>(visible[t][j])];
          rope(kj, nkv, key_pos[t][j]);
          double s = 0;
          for (int d = 0; d < hd; ++d) s += qt[static_cast<size_t>(h * hd + d)] * kj[static_cast<size_t>(kvh * hd + d)];
          sc.push_back(s / std::sqrt(static_cast<double>(hd)));
        }
        double mx = sc[0], sum = 0;
        for (double s : sc) mx = std::max(mx, s);
        for (double& s : sc) sum += (s = std::exp(s - mx));
        if (on_probs) {
          std::vector<double> p(sc.size());
          for (size_t j = 0; j < sc.size(); ++j) p[j] = sc[j] / sum;
          on_probs(layer_index, t, h, p);
        }
        for (size_t j = 0; j < sc.size(); ++j)
          for (int d = 0; d < hd; ++d)
            att[static_cast<size_t>(h * hd + d)] +=
                sc[j] / sum * v[static_cast<size_t>(visible[t][j])][static_cast<size_t>(kvh * hd + d)];
      }
      const auto o = mv(wo, att, static_cast<size_t>(D));
      for (int d = 0; d < D; ++d) nx[t][static_cast<size_t>(d)] += o[static_cast<size_t>(d)];
      const auto xb = rms(nx[t], L.ffn_norm.f32());
      const auto g = mv(wg, xb, static_cast<size_t>(H)), u = mv(wu, xb, static_cast<size_t>(H));
      std::vector<double> hbuf(static_cast<size_t>(H));
      for (int i = 0; i < H; ++i)
        hbuf[static_cast<size_t>(i)] =
            g[static_cast<size_t>(i)] / (1 + std::exp(-g[static_cast<size_t>(i)])) * u[static_cast<size_t>(i)];
      const auto dn = mv(wd, hbuf, static_cast<size_t>(D));
      for (int d = 0; d < D; ++d) nx[t][static_cast<size_t>(d)] += dn[static_cast<size_t>(d)];
    }
    x = nx;
  }
  std::vector<std::vector<double>> logits;
  for (size_t t = 0; t < T; ++t)
    logits.push_back(mv(out_w, rms(x[t], m.output_norm.f32()), static_cast<size_t>(c.n_vocab)));
  return logits;
}

}  // namespace ss::test
