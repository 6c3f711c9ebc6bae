#include <sys/stat.h>

#include <cmath>

#include "model/model.h"

namespace ss {

const char* supported_architectures() {
  return "llama, mistral, qwen2, qwen3, gemma2, gemma3, gpt-oss, gptneox, phi2, mpt (GGUF); llama, mistral, qwen2 "
         "(HF); "
         "llama2.c";
}

static bool is_dir(const std::string& p) {
  struct stat st {};
  return stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

static bool ends_with(const std::string& s, const std::string& suf) {
  return s.size() >= suf.size() && s.compare(s.size() - suf.size(), suf.size(), suf) == 0;
}

bool is_gguf_file(const std::string& path) {
  if (is_dir(path)) return false;
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return false;
  char magic[4] = {};
  const size_t n = std::fread(magic, 1, 4, f);
  std::fclose(f);
  return n == 4 && std::string(magic, 4) == "GGUF";
}

Result<std::shared_ptr<const Model>> load_model(const ModelLoadOptions& opts) {
  Result<std::shared_ptr<Model>> m = make_error("unreachable");
  if (is_dir(opts.path)) {
    m = load_hf_model(opts.path);
  } else if (ends_with(opts.path, ".gguf")) {
    m = load_gguf_model(opts.path);
  } else if (ends_with(opts.path, ".safetensors")) {
    const auto slash = opts.path.find_last_of('/');
    m = load_hf_model(slash == std::string::npos ? "." : opts.path.substr(0, slash));
  } else if (is_gguf_file(opts.path)) {
    m = load_gguf_model(opts.path);
  } else {
    m = load_llama2c_model(opts.path, opts.tokenizer_path);
  }
  if (!m.ok()) return m.error();
  SS_TRY(validate_model(*m.value()));
  return std::shared_ptr<const Model>(std::move(m).value());
}

Status validate_model(const Model& m) {
  const auto& c = m.config;
  auto bad = [&](const std::string& what) { return make_error(m.source + ": " + what); };
  if (c.n_vocab <= 0 || c.dim <= 0 || c.n_layers <= 0 || c.n_heads <= 0 || c.n_kv_heads <= 0 || c.head_dim <= 0 ||
      c.hidden_dim <= 0)
    return bad("invalid hyper-parameters (a size is zero or negative)");
  if (c.n_heads % c.n_kv_heads != 0) return bad("head_count must be a multiple of head_count_kv");
  if (!(c.norm_eps > 0) || !std::isfinite(c.norm_eps)) return bad("invalid norm epsilon");
  if (static_cast<int>(c.layer_attention.size()) != c.n_layers) return bad("per-layer attention kinds missing");
  for (const auto& la : c.layer_attention) {
    if (la.rotary < 0 || la.rotary >= static_cast<int>(c.rotaries.size())) return bad("invalid rotary index");
    if (la.sliding_window != 0 && la.sliding_window != c.sliding_window())
      return bad("sliding layers with different windows are not supported");
  }
  for (const auto& r : c.rotaries) {
    if (c.positions == PositionKind::Rope && (r.dim <= 0 || r.dim > c.head_dim || r.dim % 2 != 0))
      return bad("invalid rope dimension count");
    if (!(r.base > 0) || !(r.freq_scale > 0) || !std::isfinite(r.base) || !std::isfinite(r.freq_scale))
      return bad("invalid rope base or scaling");
    if (r.yarn_ext_factor > 0 && r.yarn_orig_ctx <= 0) return bad("YaRN without an original context length");
  }
  if (c.positions == PositionKind::Alibi && !(c.alibi_max_bias > 0)) return bad("invalid ALiBi max bias");
  if (c.ffn == FfnKind::MoeSwigluOai && (c.n_experts <= 0 || c.n_experts_used <= 0 || c.n_experts_used > c.n_experts))
    return bad("invalid expert counts");
  if (m.vocab.size() != c.n_vocab)
    return bad("tokenizer has " + std::to_string(m.vocab.size()) + " tokens but the model has " +
               std::to_string(c.n_vocab));
  auto shape = [&](const TensorView& t, int64_t ne0, int64_t ne1, const std::string& what) -> Status {
    if (t.empty()) return bad("missing tensor " + what);
    if (t.ne0 != ne0 || t.ne1 != ne1)
      return bad("tensor " + t.name + " has shape [" + std::to_string(t.ne1) + " x " + std::to_string(t.ne0) +
                 "], expected [" + std::to_string(ne1) + " x " + std::to_string(ne0) + "]");
    return ok_status();
  };
  // Norms, biases and sink logits are read as plain float arrays.
  auto vec = [&](const TensorView& t, int64_t n, const std::string& what) -> Status {
    if (t.empty()) return ok_status();
    SS_TRY(shape(t, n, 1, what));
    if (t.type != GgmlType::F32) return bad("tensor " + t.name + " must be F32");
    return ok_status();
  };
  // As vec, and present when the architecture needs it.
  auto vec_if = [&](bool required, const TensorView& t, int64_t n, const std::string& what) -> Status {
    if (required && t.empty()) return bad("missing tensor " + what);
    return vec(t, n, what);
  };
  SS_TRY(shape(m.tok_embd, c.dim, c.n_vocab, "token embedding"));
  SS_TRY(vec_if(true, m.output_norm, c.dim, "output norm"));
  SS_TRY(vec(m.output_norm_b, c.dim, "output norm bias"));
  SS_TRY(shape(m.output, c.dim, c.n_vocab, "output"));
  SS_TRY(vec(m.output_b, c.n_vocab, "output bias"));
  if (static_cast<int>(m.layers.size()) != c.n_layers) return bad("layer count mismatch");
  for (const auto& l : m.layers) {
    SS_TRY(vec_if(true, l.attn_norm, c.dim, "attn_norm"));
    SS_TRY(vec(l.attn_norm_b, c.dim, "attn_norm bias"));
    SS_TRY(shape(l.wq, c.dim, c.q_dim(), "attn_q"));
    SS_TRY(shape(l.wk, c.dim, c.kv_dim(), "attn_k"));
    SS_TRY(shape(l.wv, c.dim, c.kv_dim(), "attn_v"));
    SS_TRY(shape(l.wo, c.q_dim(), c.dim, "attn_output"));
    SS_TRY(vec(l.bq, c.q_dim(), "attn_q bias"));
    SS_TRY(vec(l.bk, c.kv_dim(), "attn_k bias"));
    SS_TRY(vec(l.bv, c.kv_dim(), "attn_v bias"));
    SS_TRY(vec(l.bo, c.dim, "attn_output bias"));
    SS_TRY(vec_if(c.qk_norm, l.q_norm, c.head_dim, "attn_q_norm"));
    SS_TRY(vec_if(c.qk_norm, l.k_norm, c.head_dim, "attn_k_norm"));
    SS_TRY(vec_if(c.learned_sinks, l.sinks, c.n_heads, "attn_sinks"));
    SS_TRY(vec_if(c.post_norms, l.post_attn_norm, c.dim, "post_attention_norm"));
    SS_TRY(vec_if(c.post_norms, l.post_ffn_norm, c.dim, "post_ffw_norm"));
    SS_TRY(vec_if(c.residual != ResidualKind::ParallelSharedNorm, l.ffn_norm, c.dim, "ffn_norm"));
    SS_TRY(vec(l.ffn_norm_b, c.dim, "ffn_norm bias"));
    if (c.ffn == FfnKind::MoeSwigluOai) {
      SS_TRY(shape(l.router, c.dim, c.n_experts, "ffn_gate_inp"));
      SS_TRY(vec(l.router_b, c.n_experts, "ffn_gate_inp bias"));
      for (const auto* set : {&l.exp_gate, &l.exp_up, &l.exp_down})
        if (static_cast<int>(set->size()) != c.n_experts) return bad("expert tensors missing");
      for (const auto* set : {&l.exp_gate_b, &l.exp_up_b, &l.exp_down_b})
        if (!set->empty() && static_cast<int>(set->size()) != c.n_experts) return bad("expert biases missing");
      for (int e = 0; e < c.n_experts; ++e) {
        const auto u = static_cast<size_t>(e);
        SS_TRY(shape(l.exp_gate[u], c.dim, c.hidden_dim, "ffn_gate_exps"));
        SS_TRY(shape(l.exp_up[u], c.dim, c.hidden_dim, "ffn_up_exps"));
        SS_TRY(shape(l.exp_down[u], c.hidden_dim, c.dim, "ffn_down_exps"));
        if (!l.exp_gate_b.empty()) SS_TRY(vec(l.exp_gate_b[u], c.hidden_dim, "ffn_gate_exps bias"));
        if (!l.exp_up_b.empty()) SS_TRY(vec(l.exp_up_b[u], c.hidden_dim, "ffn_up_exps bias"));
        if (!l.exp_down_b.empty()) SS_TRY(vec(l.exp_down_b[u], c.dim, "ffn_down_exps bias"));
      }
      continue;
    }
    if (c.ffn != FfnKind::GeluMlp) SS_TRY(shape(l.w_gate, c.dim, c.hidden_dim, "ffn_gate"));
    SS_TRY(shape(l.w_up, c.dim, c.hidden_dim, "ffn_up"));
    SS_TRY(shape(l.w_down, c.hidden_dim, c.dim, "ffn_down"));
    SS_TRY(vec(l.b_gate, c.hidden_dim, "ffn_gate bias"));
    SS_TRY(vec(l.b_up, c.hidden_dim, "ffn_up bias"));
    SS_TRY(vec(l.b_down, c.dim, "ffn_down bias"));
  }
  return ok_status();
}

}  // namespace ss
