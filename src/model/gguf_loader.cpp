#include "format/gguf.h"
#include "model/model.h"

namespace ss {

namespace {

Status load_gguf_vocab(const GgufFile& g, Vocab& v) {
  SS_ASSIGN_OR_RETURN(const std::string model, g.get_string("tokenizer.ggml.model"));
  const auto* tokens = g.find("tokenizer.ggml.tokens");
  if (!tokens || tokens->type != GgufValueType::ARRAY || tokens->elem_type != GgufValueType::STRING)
    return make_error(g.path() + ": missing tokenizer.ggml.tokens");
  for (const auto& t : tokens->arr) v.pieces.push_back(t.s);
  const size_t n = v.pieces.size();
  if (const auto* s = g.find("tokenizer.ggml.scores")) {
    if (s->type != GgufValueType::ARRAY || s->arr.size() != n)
      return make_error(g.path() + ": tokenizer.ggml.scores size mismatch");
    for (const auto& x : s->arr) v.scores.push_back(static_cast<float>(x.f));
  }
  if (const auto* t = g.find("tokenizer.ggml.token_type")) {
    if (t->type != GgufValueType::ARRAY || t->arr.size() != n)
      return make_error(g.path() + ": tokenizer.ggml.token_type size mismatch");
    for (const auto& x : t->arr) {
      if (x.i < 1 || x.i > 6) return make_error(g.path() + ": invalid token type " + std::to_string(x.i));
      v.types.push_back(static_cast<TokenType>(x.i));
    }
  }
  if (model == "llama") {
    v.kind = VocabKind::Spm;
  } else if (model == "gpt2") {
    v.kind = VocabKind::ByteLevel;
    const auto* m = g.find("tokenizer.ggml.merges");
    if (!m || m->type != GgufValueType::ARRAY) return make_error(g.path() + ": gpt2 tokenizer without merges");
    for (const auto& x : m->arr) {
      const auto sp = x.s.find(' ', 1);
      if (sp == std::string::npos) return make_error(g.path() + ": malformed merge '" + x.s + "'");
      v.merges.emplace_back(x.s.substr(0, sp), x.s.substr(sp + 1));
    }
    const auto pre = g.get_string("tokenizer.ggml.pre");
    const std::string p = pre.ok() ? pre.value() : "default";
    if (p == "llama3" || p == "llama-bpe" || p == "smaug-bpe") {
      v.pre = PreTokenizer::Llama3;
      v.ignore_merges = true;
    } else if (p == "qwen2")
      v.pre = PreTokenizer::Qwen2;
    else
      v.pre = PreTokenizer::Gpt2;
    v.add_bos = false;
    v.add_space_prefix = false;
  } else {
    return make_error(g.path() + ": unsupported tokenizer model '" + model + "' (supported: llama, gpt2)");
  }
  auto id = [&](const char* key, int32_t& out) -> Status {
    if (auto x = g.opt_int(key)) {
      if (*x < 0 || *x >= static_cast<int64_t>(n)) return make_error(g.path() + ": " + key + " out of range");
      out = static_cast<int32_t>(*x);
    }
    return ok_status();
  };
  SS_TRY(id("tokenizer.ggml.bos_token_id", v.bos));
  SS_TRY(id("tokenizer.ggml.eos_token_id", v.eos));
  SS_TRY(id("tokenizer.ggml.unknown_token_id", v.unk));
  SS_TRY(id("tokenizer.ggml.eot_token_id", v.eot));
  if (auto x = g.opt_int("tokenizer.ggml.add_bos_token")) v.add_bos = *x != 0;
  if (auto x = g.opt_int("tokenizer.ggml.add_space_prefix")) v.add_space_prefix = *x != 0;
  if (auto t = g.get_string("tokenizer.chat_template"); t.ok()) v.chat_template = t.value();
  v.finalize();
  return ok_status();
}

}  // namespace

Result<std::shared_ptr<Model>> load_gguf_model(const std::string& path) {
  SS_ASSIGN_OR_RETURN(auto g, GgufFile::open(path));
  auto m = std::make_shared<Model>();
  m->source = path;
  auto& c = m->config;
  SS_ASSIGN_OR_RETURN(c.arch_name, g.get_string("general.architecture"));
  const std::string a = c.arch_name;
  if (a == "llama")
    c.arch = Arch::Llama;
  else if (a == "mistral")
    c.arch = Arch::Mistral;
  else if (a == "qwen2")
    c.arch = Arch::Qwen2;
  else
    return make_error(path + ": unsupported architecture '" + a + "' (supported: " + supported_architectures() + ")");

  auto geti = [&](const std::string& k) { return g.get_int(a + "." + k); };
  SS_ASSIGN_OR_RETURN(c.trained_context, geti("context_length"));
  SS_ASSIGN_OR_RETURN(const int64_t dim, geti("embedding_length"));
  SS_ASSIGN_OR_RETURN(const int64_t nl, geti("block_count"));
  SS_ASSIGN_OR_RETURN(const int64_t ff, geti("feed_forward_length"));
  SS_ASSIGN_OR_RETURN(const int64_t nh, geti("attention.head_count"));
  const int64_t nkv = g.opt_int(a + ".attention.head_count_kv").value_or(nh);
  for (int64_t x : {dim, nl, ff, nh, nkv})
    if (x <= 0 || x > (1 << 20)) return make_error(path + ": hyper-parameter out of range: " + std::to_string(x));
  if (dim % nh != 0) return make_error(path + ": embedding_length is not a multiple of head_count");
  c.dim = static_cast<int>(dim);
  c.n_layers = static_cast<int>(nl);
  c.hidden_dim = static_cast<int>(ff);
  c.n_heads = static_cast<int>(nh);
  c.n_kv_heads = static_cast<int>(nkv);
  c.head_dim = static_cast<int>(g.opt_int(a + ".attention.key_length").value_or(dim / nh));
  c.rope_dim = static_cast<int>(g.opt_int(a + ".rope.dimension_count").value_or(c.head_dim));
  c.rope_base = static_cast<float>(g.opt_float(a + ".rope.freq_base").value_or(10000.0));
  SS_ASSIGN_OR_RETURN(const double eps, g.get_float(a + ".attention.layer_norm_rms_epsilon"));
  c.rms_eps = static_cast<float>(eps);
  c.rope_style = c.arch == Arch::Qwen2 ? RopeStyle::Neox : RopeStyle::Interleaved;
  c.qkv_bias = c.arch == Arch::Qwen2;

  SS_TRY(load_gguf_vocab(g, m->vocab));
  SS_ASSIGN_OR_RETURN(m->tok_embd, g.tensor("token_embd.weight"));
  c.n_vocab = static_cast<int>(m->tok_embd.ne1);
  SS_ASSIGN_OR_RETURN(m->output_norm, g.tensor("output_norm.weight"));
  if (g.has_tensor("output.weight")) {
    SS_ASSIGN_OR_RETURN(m->output, g.tensor("output.weight"));
  } else {
    m->output = m->tok_embd;
    c.tied_output = true;
  }
  for (int l = 0; l < c.n_layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    LayerWeights lw;
    SS_ASSIGN_OR_RETURN(lw.attn_norm, g.tensor(p + "attn_norm.weight"));
    SS_ASSIGN_OR_RETURN(lw.wq, g.tensor(p + "attn_q.weight"));
    SS_ASSIGN_OR_RETURN(lw.wk, g.tensor(p + "attn_k.weight"));
    SS_ASSIGN_OR_RETURN(lw.wv, g.tensor(p + "attn_v.weight"));
    SS_ASSIGN_OR_RETURN(lw.wo, g.tensor(p + "attn_output.weight"));
    SS_ASSIGN_OR_RETURN(lw.ffn_norm, g.tensor(p + "ffn_norm.weight"));
    SS_ASSIGN_OR_RETURN(lw.w_gate, g.tensor(p + "ffn_gate.weight"));
    SS_ASSIGN_OR_RETURN(lw.w_up, g.tensor(p + "ffn_up.weight"));
    SS_ASSIGN_OR_RETURN(lw.w_down, g.tensor(p + "ffn_down.weight"));
    if (c.qkv_bias) {
      SS_ASSIGN_OR_RETURN(lw.bq, g.tensor(p + "attn_q.bias"));
      SS_ASSIGN_OR_RETURN(lw.bk, g.tensor(p + "attn_k.bias"));
      SS_ASSIGN_OR_RETURN(lw.bv, g.tensor(p + "attn_v.bias"));
    }
    m->layers.push_back(std::move(lw));
  }
  m->keep_alive.push_back(g.mapping());
  return m;
}

}  // namespace ss
