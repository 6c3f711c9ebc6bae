#include <algorithm>
#include <cmath>

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
    if (auto kind = pre_tokenizer_from_name(p)) {
      v.pre = *kind;
    } else {
      // As llama.cpp: guessing another model's splitting would tokenize
      // every prompt differently from how the model was trained.
      return make_error(g.path() + ": unknown pre-tokenizer type '" + p + "'");
    }
    // As llama.cpp: for these names a word that is itself a token stays
    // whole, and BOS is added unless the file says otherwise.
    const bool llama3_like = p == "llama3" || p == "llama-v3" || p == "llama-bpe" || p == "falcon3" ||
                             p == "falcon-h1" || p == "pixtral" || p == "midm-2.0" || p == "lfm2" ||
                             p == "jina-v5-nano" || p == "tekken";
    v.ignore_merges = llama3_like;
    v.add_bos = llama3_like;
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
  for (const char* key : {"tokenizer.ggml.eom_token_id", "tokenizer.ggml.fim_pad_token_id",
                          "tokenizer.ggml.fim_rep_token_id", "tokenizer.ggml.fim_sep_token_id"}) {
    int32_t extra = -1;
    SS_TRY(id(key, extra));
    if (extra >= 0) v.eog_extra.push_back(extra);
  }
  if (auto x = g.opt_int("tokenizer.ggml.add_bos_token")) v.add_bos = *x != 0;
  if (auto x = g.opt_int("tokenizer.ggml.add_space_prefix")) v.add_space_prefix = *x != 0;
  if (auto t = g.get_string("tokenizer.chat_template"); t.ok()) v.chat_template = t.value();
  v.finalize();
  return ok_status();
}

// Architecture choices per general.architecture: what the file states plus
// what llama.cpp hard-codes for the family (not in the metadata).
Status configure_arch(const GgufFile& g, ModelConfig& c) {
  const std::string& a = c.arch_name;
  auto key = [&](const std::string& k) { return a + "." + k; };
  RotaryConfig rot;
  rot.dim = static_cast<int>(g.opt_int(key("rope.dimension_count")).value_or(c.head_dim));
  rot.base = g.opt_float(key("rope.freq_base")).value_or(10000.0);
  rot.neox = true;
  const auto scaling = g.get_string(key("rope.scaling.type"));
  const double factor = g.opt_float(key("rope.scaling.factor")).value_or(1.0);
  if (scaling.ok() && scaling.value() == "linear" && factor > 0) rot.freq_scale = 1.0 / factor;
  if (scaling.ok() && scaling.value() == "yarn" && factor > 0) {
    rot.freq_scale = 1.0 / factor;
    rot.yarn_ext_factor = 1.0;
    rot.yarn_orig_ctx = g.opt_int(key("rope.scaling.original_context_length")).value_or(c.trained_context);
    rot.yarn_attn_factor = g.opt_float(key("rope.scaling.attn_factor")).value_or(1.0);
    rot.yarn_beta_fast = g.opt_float(key("rope.scaling.yarn_beta_fast")).value_or(32.0);
    rot.yarn_beta_slow = g.opt_float(key("rope.scaling.yarn_beta_slow")).value_or(1.0);
  }
  c.rotaries = {rot};
  c.uniform_layers();
  // Bounded before use: the sliding ring is sized from it (as KvPolicy::parse bounds W).
  const int64_t swa_raw = g.opt_int(key("attention.sliding_window")).value_or(0);
  if (swa_raw < 0 || swa_raw > (int64_t{1} << 24))
    return make_error(g.path() + ": sliding_window " + std::to_string(swa_raw) + " out of range [0, 2^24]");
  const int swa = static_cast<int>(swa_raw);
  auto eps = [&](const char* k) -> Status {
    SS_ASSIGN_OR_RETURN(const double e, g.get_float(key(k)));
    c.norm_eps = static_cast<float>(e);
    return ok_status();
  };
  if (a == "llama" || a == "mistral" || a == "qwen2" || a == "qwen3") {
    SS_TRY(eps("attention.layer_norm_rms_epsilon"));
    // llama.cpp's NORM rope for Llama/Mistral (its converter permutes q/k).
    c.rotaries[0].neox = a == "qwen2" || a == "qwen3";
    c.qk_norm = a == "qwen3";
  } else if (a == "gemma3") {
    SS_TRY(eps("attention.layer_norm_rms_epsilon"));
    c.ffn = FfnKind::GeGlu;
    c.qk_norm = true;
    c.post_norms = true;
    c.embedding_scale = std::sqrt(static_cast<float>(c.dim));
    // Gemma 3 27B scales queries by 1/sqrt(dim / heads), the others by 1/sqrt(head_dim).
    if (c.n_layers == 62) c.attn_scale = 1.0f / std::sqrt(static_cast<float>(c.dim / c.n_heads));
    if (swa > 0) {
      // Five sliding layers, then one global; sliding layers rotate with
      // base 10000 (freq_base_swa) and no scaling.
      RotaryConfig local = rot;
      local.base = g.opt_float(key("rope.freq_base_swa")).value_or(10000.0);
      local.freq_scale = 1.0;
      c.rotaries.push_back(local);
      for (int l = 0; l < c.n_layers; ++l)
        if (l % 6 < 5) c.layer_attention[static_cast<size_t>(l)] = {swa, 1};
    }
  } else if (a == "gemma2") {
    // As llama.cpp's llm_build_gemma2_iswa: Gemma 3's layout without q/k
    // norms, even layers sliding, one rotary, soft-capped scores and logits.
    SS_TRY(eps("attention.layer_norm_rms_epsilon"));
    c.ffn = FfnKind::GeGlu;
    c.post_norms = true;
    c.embedding_scale = std::sqrt(static_cast<float>(c.dim));
    if (c.n_layers == 46) c.attn_scale = 1.0f / std::sqrt(static_cast<float>(c.dim / c.n_heads));  // 27B
    c.attn_softcap = static_cast<float>(g.opt_float(key("attn_logit_softcapping")).value_or(50.0));
    c.final_softcap = static_cast<float>(g.opt_float(key("final_logit_softcapping")).value_or(30.0));
    if (swa > 0)
      for (int l = 0; l < c.n_layers; l += 2) c.layer_attention[static_cast<size_t>(l)].sliding_window = swa;
  } else if (a == "gptneox") {
    SS_TRY(eps("attention.layer_norm_epsilon"));
    c.norm = NormKind::Layer;
    c.ffn = FfnKind::GeluMlp;
    c.residual =
        g.opt_int(key("use_parallel_residual")).value_or(1) != 0 ? ResidualKind::Parallel : ResidualKind::Sequential;
  } else if (a == "phi2") {
    SS_TRY(eps("attention.layer_norm_epsilon"));
    c.norm = NormKind::Layer;
    c.ffn = FfnKind::GeluMlp;
    c.residual = ResidualKind::ParallelSharedNorm;
  } else if (a == "mpt") {
    SS_TRY(eps("attention.layer_norm_epsilon"));
    c.norm = NormKind::Layer;
    c.ffn = FfnKind::GeluMlp;
    c.positions = PositionKind::Alibi;
    c.alibi_max_bias = static_cast<float>(g.opt_float(key("attention.max_alibi_bias")).value_or(8.0));
    c.clamp_kqv = static_cast<float>(g.opt_float(key("attention.clamp_kqv")).value_or(0.0));
    c.rotaries[0].dim = 0;
  } else if (a == "gpt-oss") {
    SS_TRY(eps("attention.layer_norm_rms_epsilon"));
    c.ffn = FfnKind::MoeSwigluOai;
    c.learned_sinks = true;
    SS_ASSIGN_OR_RETURN(const int64_t ne, g.get_int(key("expert_count")));
    SS_ASSIGN_OR_RETURN(const int64_t nu, g.get_int(key("expert_used_count")));
    if (ne <= 0 || ne > 1024 || nu <= 0 || nu > ne) return make_error(g.path() + ": invalid expert counts");
    c.n_experts = static_cast<int>(ne);
    c.n_experts_used = static_cast<int>(nu);
    if (auto ff = g.opt_int(key("expert_feed_forward_length"))) c.hidden_dim = static_cast<int>(*ff);
    // Even layers slide (llama.cpp's set_swa_pattern(2)); both kinds share the rotary.
    if (swa > 0)
      for (int l = 0; l < c.n_layers; l += 2) c.layer_attention[static_cast<size_t>(l)].sliding_window = swa;
  } else {
    return make_error(g.path() + ": unsupported architecture '" + a + "' (supported: " + supported_architectures() +
                      ")");
  }
  return ok_status();
}

// llama.cpp's tensor names; optional ones (biases, norms the family lacks)
// stay empty views.
Status load_layer(const GgufFile& g, const ModelConfig& c, int l, LayerWeights& lw) {
  const std::string p = "blk." + std::to_string(l) + ".";
  auto req = [&](const std::string& n, TensorView& out) -> Status {
    SS_ASSIGN_OR_RETURN(out, g.tensor(p + n));
    return ok_status();
  };
  auto opt = [&](const std::string& n, TensorView& out) -> Status {
    if (g.has_tensor(p + n)) return req(n, out);
    return ok_status();
  };
  SS_TRY(req("attn_norm.weight", lw.attn_norm));
  SS_TRY(opt("attn_norm.bias", lw.attn_norm_b));
  if (g.has_tensor(p + "attn_qkv.weight")) {
    // Fused [Q | K | V] rows: three views of consecutive row ranges.
    TensorView qkv, qkv_b;
    SS_TRY(req("attn_qkv.weight", qkv));
    SS_TRY(opt("attn_qkv.bias", qkv_b));
    const int64_t rows[3] = {c.q_dim(), c.kv_dim(), c.kv_dim()};
    if (qkv.ne1 != rows[0] + rows[1] + rows[2])
      return make_error(g.path() + ": " + qkv.name + " has " + std::to_string(qkv.ne1) + " rows, expected " +
                        std::to_string(rows[0] + rows[1] + rows[2]));
    if (!qkv_b.empty() && qkv_b.ne0 != qkv.ne1) return make_error(g.path() + ": " + qkv_b.name + " size mismatch");
    TensorView* w[3] = {&lw.wq, &lw.wk, &lw.wv};
    TensorView* b[3] = {&lw.bq, &lw.bk, &lw.bv};
    int64_t first = 0;
    for (int i = 0; i < 3; ++i) {
      *w[i] = qkv;
      w[i]->ne1 = rows[i];
      w[i]->data = qkv.row(first);
      if (!qkv_b.empty()) {
        *b[i] = qkv_b;
        b[i]->ne0 = rows[i];
        b[i]->data = qkv_b.f32() + first;
      }
      first += rows[i];
    }
  } else {
    SS_TRY(req("attn_q.weight", lw.wq));
    SS_TRY(req("attn_k.weight", lw.wk));
    SS_TRY(req("attn_v.weight", lw.wv));
    SS_TRY(opt("attn_q.bias", lw.bq));
    SS_TRY(opt("attn_k.bias", lw.bk));
    SS_TRY(opt("attn_v.bias", lw.bv));
  }
  SS_TRY(req("attn_output.weight", lw.wo));
  SS_TRY(opt("attn_output.bias", lw.bo));
  if (c.qk_norm) {
    SS_TRY(req("attn_q_norm.weight", lw.q_norm));
    SS_TRY(req("attn_k_norm.weight", lw.k_norm));
  }
  if (c.learned_sinks) SS_TRY(req("attn_sinks.weight", lw.sinks));
  if (c.post_norms) {
    SS_TRY(req("post_attention_norm.weight", lw.post_attn_norm));
    SS_TRY(req("post_ffw_norm.weight", lw.post_ffn_norm));
  }
  if (c.residual != ResidualKind::ParallelSharedNorm) {
    // gpt-oss names its pre-FFN norm post_attention_norm.
    const std::string norm = c.ffn == FfnKind::MoeSwigluOai ? "post_attention_norm" : "ffn_norm";
    SS_TRY(req(norm + ".weight", lw.ffn_norm));
    SS_TRY(opt(norm + ".bias", lw.ffn_norm_b));
  }
  if (c.ffn == FfnKind::MoeSwigluOai) {
    SS_TRY(req("ffn_gate_inp.weight", lw.router));
    SS_TRY(opt("ffn_gate_inp.bias", lw.router_b));
    auto experts = [&](const std::string& n, std::vector<TensorView>& w, std::vector<TensorView>& b) -> Status {
      SS_ASSIGN_OR_RETURN(w, g.tensor_slices(p + n + ".weight"));
      if (static_cast<int>(w.size()) != c.n_experts)
        return make_error(g.path() + ": " + p + n + ".weight has " + std::to_string(w.size()) + " experts, expected " +
                          std::to_string(c.n_experts));
      if (!g.has_tensor(p + n + ".bias")) return ok_status();
      SS_ASSIGN_OR_RETURN(const TensorView all, g.tensor(p + n + ".bias"));
      if (all.type != GgmlType::F32 || all.ne1 != c.n_experts || all.ne0 != w[0].ne1)
        return make_error(g.path() + ": " + all.name + " has the wrong shape or type");
      for (int e = 0; e < c.n_experts; ++e) {
        TensorView r = all;
        r.ne1 = 1;
        r.data = all.row(e);
        b.push_back(r);
      }
      return ok_status();
    };
    SS_TRY(experts("ffn_gate_exps", lw.exp_gate, lw.exp_gate_b));
    SS_TRY(experts("ffn_up_exps", lw.exp_up, lw.exp_up_b));
    SS_TRY(experts("ffn_down_exps", lw.exp_down, lw.exp_down_b));
    return ok_status();
  }
  if (c.ffn != FfnKind::GeluMlp) SS_TRY(req("ffn_gate.weight", lw.w_gate));
  SS_TRY(req("ffn_up.weight", lw.w_up));
  SS_TRY(req("ffn_down.weight", lw.w_down));
  SS_TRY(opt("ffn_gate.bias", lw.b_gate));
  SS_TRY(opt("ffn_up.bias", lw.b_up));
  SS_TRY(opt("ffn_down.bias", lw.b_down));
  return ok_status();
}

}  // namespace

Result<Vocab> load_gguf_vocab_file(const std::string& path) {
  SS_ASSIGN_OR_RETURN(auto g, GgufFile::open(path));
  Vocab v;
  SS_TRY(load_gguf_vocab(g, v));
  return v;
}

Result<std::shared_ptr<Model>> load_gguf_model(const std::string& path) {
  SS_ASSIGN_OR_RETURN(auto g, GgufFile::open(path));
  auto m = std::make_shared<Model>();
  m->source = path;
  auto& c = m->config;
  SS_ASSIGN_OR_RETURN(c.arch_name, g.get_string("general.architecture"));
  const std::string a = c.arch_name;
  static const char* const kArchs[] = {"llama",  "mistral", "qwen2", "qwen3", "gemma2",
                                       "gemma3", "gptneox", "phi2",  "mpt",   "gpt-oss"};
  if (std::find(std::begin(kArchs), std::end(kArchs), a) == std::end(kArchs))
    return make_error(path + ": unsupported architecture '" + a + "' (supported: " + supported_architectures() + ")");

  auto geti = [&](const std::string& k) { return g.get_int(a + "." + k); };
  SS_ASSIGN_OR_RETURN(c.trained_context, geti("context_length"));
  SS_ASSIGN_OR_RETURN(const int64_t dim, geti("embedding_length"));
  SS_ASSIGN_OR_RETURN(const int64_t nl, geti("block_count"));
  const int64_t ff = g.opt_int(a + ".feed_forward_length").value_or(0);
  SS_ASSIGN_OR_RETURN(const int64_t nh, geti("attention.head_count"));
  const int64_t nkv = g.opt_int(a + ".attention.head_count_kv").value_or(nh);
  const int64_t hd = g.opt_int(a + ".attention.key_length").value_or(nh > 0 ? dim / nh : 0);
  for (int64_t x : {dim, nl, nh, nkv, hd})
    if (x <= 0 || x > (1 << 20)) return make_error(path + ": hyper-parameter out of range: " + std::to_string(x));
  if (ff < 0 || ff > (1 << 20)) return make_error(path + ": feed_forward_length out of range");
  if (!g.find(a + ".attention.key_length") && dim % nh != 0)
    return make_error(path + ": embedding_length is not a multiple of head_count");
  if (g.opt_int(a + ".attention.value_length").value_or(hd) != hd)
    return make_error(path + ": value_length != key_length is not supported");
  c.dim = static_cast<int>(dim);
  c.n_layers = static_cast<int>(nl);
  c.hidden_dim = static_cast<int>(ff);
  c.n_heads = static_cast<int>(nh);
  c.n_kv_heads = static_cast<int>(nkv);
  c.head_dim = static_cast<int>(hd);
  SS_TRY(configure_arch(g, c));

  SS_TRY(load_gguf_vocab(g, m->vocab));
  SS_ASSIGN_OR_RETURN(m->tok_embd, g.tensor("token_embd.weight"));
  c.n_vocab = static_cast<int>(m->tok_embd.ne1);
  SS_ASSIGN_OR_RETURN(m->output_norm, g.tensor("output_norm.weight"));
  if (g.has_tensor("output_norm.bias")) {
    SS_ASSIGN_OR_RETURN(m->output_norm_b, g.tensor("output_norm.bias"));
  }
  if (g.has_tensor("output.weight")) {
    SS_ASSIGN_OR_RETURN(m->output, g.tensor("output.weight"));
  } else {
    m->output = m->tok_embd;
    c.tied_output = true;
  }
  if (g.has_tensor("output.bias")) {
    SS_ASSIGN_OR_RETURN(m->output_b, g.tensor("output.bias"));
  }
  for (int l = 0; l < c.n_layers; ++l) {
    LayerWeights lw;
    SS_TRY(load_layer(g, c, l, lw));
    m->layers.push_back(std::move(lw));
  }
  m->keep_alive.push_back(g.mapping());
  return m;
}

}  // namespace ss
