#include <sys/stat.h>

#include "model/model.h"

namespace ss {

const char* supported_architectures() { return "llama, mistral, qwen2 (incl. TinyLlama, SmolLM as llama)"; }

static bool is_dir(const std::string& p) {
  struct stat st {};
  return stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

static bool ends_with(const std::string& s, const std::string& suf) {
  return s.size() >= suf.size() && s.compare(s.size() - suf.size(), suf.size(), suf) == 0;
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
  } else {
    // Sniff: GGUF magic, else llama2.c.
    FILE* f = std::fopen(opts.path.c_str(), "rb");
    if (!f) return make_error(opts.path + ": cannot open");
    char magic[4] = {};
    const size_t n = std::fread(magic, 1, 4, f);
    std::fclose(f);
    if (n == 4 && std::string(magic, 4) == "GGUF")
      m = load_gguf_model(opts.path);
    else
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
  if (c.rope_dim <= 0 || c.rope_dim > c.head_dim || c.rope_dim % 2 != 0) return bad("invalid rope dimension count");
  if (!(c.rms_eps > 0) || !(c.rope_base > 0)) return bad("invalid rms epsilon or rope base");
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
  SS_TRY(shape(m.tok_embd, c.dim, c.n_vocab, "token embedding"));
  SS_TRY(shape(m.output_norm, c.dim, 1, "output norm"));
  SS_TRY(shape(m.output, c.dim, c.n_vocab, "output"));
  if (static_cast<int>(m.layers.size()) != c.n_layers) return bad("layer count mismatch");
  for (const auto& l : m.layers) {
    SS_TRY(shape(l.attn_norm, c.dim, 1, "attn_norm"));
    SS_TRY(shape(l.wq, c.dim, c.q_dim(), "attn_q"));
    SS_TRY(shape(l.wk, c.dim, c.kv_dim(), "attn_k"));
    SS_TRY(shape(l.wv, c.dim, c.kv_dim(), "attn_v"));
    SS_TRY(shape(l.wo, c.q_dim(), c.dim, "attn_output"));
    SS_TRY(shape(l.ffn_norm, c.dim, 1, "ffn_norm"));
    SS_TRY(shape(l.w_gate, c.dim, c.hidden_dim, "ffn_gate"));
    SS_TRY(shape(l.w_up, c.dim, c.hidden_dim, "ffn_up"));
    SS_TRY(shape(l.w_down, c.hidden_dim, c.dim, "ffn_down"));
    if (c.qkv_bias) {
      SS_TRY(shape(l.bq, c.q_dim(), 1, "attn_q.bias"));
      SS_TRY(shape(l.bk, c.kv_dim(), 1, "attn_k.bias"));
      SS_TRY(shape(l.bv, c.kv_dim(), 1, "attn_v.bias"));
    }
    // Norms and biases are read as plain float arrays.
    for (const auto* t : {&l.attn_norm, &l.ffn_norm, &l.bq, &l.bk, &l.bv})
      if (!t->empty() && t->type != GgmlType::F32) return bad("tensor " + t->name + " must be F32");
  }
  if (m.output_norm.type != GgmlType::F32) return bad("output norm must be F32");
  return ok_status();
}

}  // namespace ss
