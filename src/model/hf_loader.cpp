#include <nlohmann/json.hpp>

#include "format/safetensors.h"
#include "model/hf_config.h"
#include "model/model.h"
#include "util/mapped_file.h"

namespace ss {

namespace {

using nlohmann::json;

Result<int64_t> jint(const json& j, const std::string& key, const std::string& file) {
  if (!j.contains(key) || !j[key].is_number_integer()) return make_error(file + ": missing integer '" + key + "'");
  const auto v = j[key].get<int64_t>();
  if (v <= 0 || v > (int64_t{1} << 30)) return make_error(file + ": '" + key + "' out of range");
  return v;
}

// An optional number; a value outside [lo, hi] (or NaN) is an error, so the
// casts to float or int64 that follow can never overflow.
Result<double> jnum(const json& j, const std::string& key, double def, double lo, double hi, const std::string& file) {
  if (!j.contains(key) || j[key].is_null()) return def;
  if (!j[key].is_number()) return make_error(file + ": '" + key + "' is not a number");
  const double v = j[key].get<double>();
  if (!(v >= lo && v <= hi)) return make_error(file + ": '" + key + "' out of range");
  return v;
}

// An optional positive integer (same range as jint).
Result<int64_t> jint_or(const json& j, const std::string& key, int64_t def, const std::string& file) {
  if (!j.contains(key) || j[key].is_null()) return def;
  return jint(j, key, file);
}

}  // namespace

// Parses tokenizer.json (HF tokenizers): BPE models with either a metaspace
// normaliser (SentencePiece-like, rank merges) or a ByteLevel pre-tokenizer.
Status load_tokenizer_json(const std::string& path, int32_t n_vocab, Vocab& v) {
  SS_ASSIGN_OR_RETURN(const std::string text, read_text_file(path));
  const json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return make_error(path + ": not valid JSON");
  if (!j.contains("model") || !j["model"].is_object()) return make_error(path + ": no 'model' object");
  const json& m = j["model"];
  if (!m.contains("type") || !m["type"].is_string() || m["type"].get<std::string>() != "BPE")
    return make_error(path + ": unsupported tokenizer model (supported: BPE)");
  if (!m.contains("vocab") || !m["vocab"].is_object()) return make_error(path + ": model.vocab missing");
  v.pieces.assign(static_cast<size_t>(n_vocab), std::string());
  std::vector<bool> seen(static_cast<size_t>(n_vocab), false);
  auto put = [&](const std::string& piece, const json& idj) -> Status {
    if (!idj.is_number_integer()) return make_error(path + ": token id for '" + piece + "' is not an integer");
    const auto id = idj.get<int64_t>();
    if (id < 0 || id >= n_vocab)
      return make_error(path + ": token id " + std::to_string(id) + " outside the model's vocab of " +
                        std::to_string(n_vocab));
    v.pieces[static_cast<size_t>(id)] = piece;
    seen[static_cast<size_t>(id)] = true;
    return ok_status();
  };
  for (auto it = m["vocab"].begin(); it != m["vocab"].end(); ++it) SS_TRY(put(it.key(), it.value()));
  v.types.assign(static_cast<size_t>(n_vocab), TokenType::Normal);
  if (j.contains("added_tokens") && j["added_tokens"].is_array()) {
    for (const auto& at : j["added_tokens"]) {
      if (!at.is_object() || !at.contains("content") || !at["content"].is_string() || !at.contains("id"))
        return make_error(path + ": malformed added_tokens entry");
      SS_TRY(put(at["content"].get<std::string>(), at["id"]));
      const bool special = at.contains("special") && at["special"].is_boolean() && at["special"].get<bool>();
      v.types[at["id"].get<size_t>()] = special ? TokenType::Control : TokenType::UserDefined;
    }
  }
  for (int32_t i = 0; i < n_vocab; ++i)
    if (!seen[static_cast<size_t>(i)]) v.types[static_cast<size_t>(i)] = TokenType::Unused;
  if (m.contains("merges") && m["merges"].is_array()) {
    for (const auto& mg : m["merges"]) {
      if (mg.is_string()) {
        const auto s = mg.get<std::string>();
        const auto sp = s.find(' ', 1);
        if (sp == std::string::npos) return make_error(path + ": malformed merge '" + s + "'");
        v.merges.emplace_back(s.substr(0, sp), s.substr(sp + 1));
      } else if (mg.is_array() && mg.size() == 2 && mg[0].is_string() && mg[1].is_string()) {
        v.merges.emplace_back(mg[0].get<std::string>(), mg[1].get<std::string>());
      } else {
        return make_error(path + ": malformed merge entry");
      }
    }
  }
  v.ignore_merges = m.contains("ignore_merges") && m["ignore_merges"].is_boolean() && m["ignore_merges"].get<bool>();
  v.fuse_unk = m.contains("fuse_unk") && m["fuse_unk"].is_boolean() && m["fuse_unk"].get<bool>();
  if (m.contains("unk_token") && m["unk_token"].is_string()) {
    for (int32_t i = 0; i < n_vocab; ++i)
      if (v.pieces[static_cast<size_t>(i)] == m["unk_token"].get<std::string>()) v.unk = i;
  }
  const std::string dumped_pre = j.contains("pre_tokenizer") ? j["pre_tokenizer"].dump() : "null";
  const std::string dumped_norm = j.contains("normalizer") ? j["normalizer"].dump() : "null";
  if (dumped_pre.find("ByteLevel") != std::string::npos) {
    v.kind = VocabKind::ByteLevel;
    v.add_space_prefix = false;
    // Which regex the Split pre-tokenizer holds (as JSON-escaped text):
    // o200k / tekken split words at case changes; Llama 3 and Qwen2 take a
    // leading non-letter into a word (digits in threes or alone); else GPT-2.
    auto has = [&](const char* x) { return dumped_pre.find(x) != std::string::npos; };
    if (has("\\\\p{Lu}\\\\p{Lt}\\\\p{Lm}\\\\p{Lo}\\\\p{M}"))
      v.pre = has("(?i:'s") ? PreTokenizer::Gpt4o : PreTokenizer::Tekken;
    else if (has("[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{L}+"))
      v.pre = has("\\\\p{N}{1,3}") ? PreTokenizer::Llama3 : PreTokenizer::Qwen2;
    else
      v.pre = PreTokenizer::Gpt2;
  } else {
    v.kind = VocabKind::RankBpe;
    v.add_space_prefix =
        dumped_norm.find("Prepend") != std::string::npos || dumped_pre.find("Metaspace") != std::string::npos;
  }
  // BOS is added when the post-processor's single template starts with a special token.
  v.add_bos = false;
  if (j.contains("post_processor") && j["post_processor"].is_object()) {
    const auto& pp = j["post_processor"];
    if (pp.contains("single") && pp["single"].is_array() && !pp["single"].empty() &&
        pp["single"][0].contains("SpecialToken"))
      v.add_bos = true;
  }
  return ok_status();
}

Result<std::shared_ptr<Model>> load_hf_model(const std::string& dir) {
  const std::string cfg_path = dir + "/config.json";
  SS_ASSIGN_OR_RETURN(const std::string cfg_text, read_text_file(cfg_path));
  const json j = json::parse(cfg_text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return make_error(cfg_path + ": not valid JSON");
  auto m = std::make_shared<Model>();
  m->source = dir;
  auto& c = m->config;
  c.arch_name = j.contains("model_type") && j["model_type"].is_string() ? j["model_type"].get<std::string>() : "";
  if (c.arch_name != "llama" && c.arch_name != "mistral" && c.arch_name != "qwen2")
    return make_error(cfg_path + ": unsupported model_type '" + c.arch_name +
                      "' (supported: " + supported_architectures() + ")");
  SS_ASSIGN_OR_RETURN(const int64_t dim, jint(j, "hidden_size", cfg_path));
  SS_ASSIGN_OR_RETURN(const int64_t ff, jint(j, "intermediate_size", cfg_path));
  SS_ASSIGN_OR_RETURN(const int64_t nl, jint(j, "num_hidden_layers", cfg_path));
  SS_ASSIGN_OR_RETURN(const int64_t nh, jint(j, "num_attention_heads", cfg_path));
  SS_ASSIGN_OR_RETURN(const int64_t nv, jint(j, "vocab_size", cfg_path));
  SS_ASSIGN_OR_RETURN(const int64_t nkv, jint_or(j, "num_key_value_heads", nh, cfg_path));
  if (dim % nh != 0) return make_error(cfg_path + ": hidden_size is not a multiple of num_attention_heads");
  c.dim = static_cast<int>(dim);
  c.hidden_dim = static_cast<int>(ff);
  c.n_layers = static_cast<int>(nl);
  c.n_heads = static_cast<int>(nh);
  c.n_kv_heads = static_cast<int>(nkv);
  c.n_vocab = static_cast<int>(nv);
  SS_ASSIGN_OR_RETURN(const int64_t head_dim, jint_or(j, "head_dim", dim / nh, cfg_path));
  c.head_dim = static_cast<int>(head_dim);
  SS_ASSIGN_OR_RETURN(const double n_ctx, jnum(j, "max_position_embeddings", 2048, 1, 1e12, cfg_path));
  SS_ASSIGN_OR_RETURN(const double rope_theta, jnum(j, "rope_theta", 10000.0, 1e-3, 1e30, cfg_path));
  SS_ASSIGN_OR_RETURN(const double rms_eps, jnum(j, "rms_norm_eps", 1e-6, 1e-30, 1, cfg_path));
  c.trained_context = static_cast<int64_t>(n_ctx);
  c.norm_eps = static_cast<float>(rms_eps);
  // HF stores q/k in rotate-half order.
  c.rotaries = {RotaryConfig{.dim = c.head_dim, .neox = true, .base = rope_theta}};
  c.uniform_layers();
  const bool qkv_bias = c.arch_name == "qwen2" || (j.contains("attention_bias") && j["attention_bias"].is_boolean() &&
                                                   j["attention_bias"].get<bool>());
  c.tied_output = j.contains("tie_word_embeddings") && j["tie_word_embeddings"].is_boolean() &&
                  j["tie_word_embeddings"].get<bool>();

  SS_TRY(load_tokenizer_json(dir + "/tokenizer.json", c.n_vocab, m->vocab));
  auto& v = m->vocab;
  if (j.contains("bos_token_id") && j["bos_token_id"].is_number_integer()) v.bos = j["bos_token_id"].get<int32_t>();
  if (j.contains("eos_token_id") && j["eos_token_id"].is_number_integer()) v.eos = j["eos_token_id"].get<int32_t>();
  if (v.bos >= c.n_vocab || v.eos >= c.n_vocab) return make_error(cfg_path + ": bos/eos token id outside the vocab");
  // Instruction-tuned models list their end-of-turn ids here (Llama 3:
  // <|end_of_text|>, <|eom_id|>, <|eot_id|>); the first is the eos.
  v.eog_extra = hf_eos_ids(dir, c.n_vocab);
  if (v.eos < 0 && !v.eog_extra.empty()) v.eos = v.eog_extra.front();
  v.chat_template = hf_chat_template(dir);
  v.finalize();

  SS_ASSIGN_OR_RETURN(auto st, SafetensorsSet::open_dir(dir));
  auto st_ptr = std::make_shared<SafetensorsSet>(std::move(st));
  const auto& s = *st_ptr;
  auto get = [&](const std::string& name) { return s.tensor(name); };
  if (s.has("model.embed_tokens.weight")) {
    SS_ASSIGN_OR_RETURN(m->tok_embd, get("model.embed_tokens.weight"));
  } else if (c.tied_output && s.has("lm_head.weight")) {
    SS_ASSIGN_OR_RETURN(m->tok_embd, get("lm_head.weight"));  // tied weights saved under the head's name
  } else {
    return make_error(dir + ": missing tensor model.embed_tokens.weight");
  }
  if (s.has("lm_head.weight") && !c.tied_output) {
    SS_ASSIGN_OR_RETURN(m->output, get("lm_head.weight"));
  } else {
    m->output = m->tok_embd;
  }
  SS_ASSIGN_OR_RETURN(m->output_norm, get("model.norm.weight"));
  for (int l = 0; l < c.n_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    LayerWeights lw;
    SS_ASSIGN_OR_RETURN(lw.attn_norm, get(p + "input_layernorm.weight"));
    SS_ASSIGN_OR_RETURN(lw.wq, get(p + "self_attn.q_proj.weight"));
    SS_ASSIGN_OR_RETURN(lw.wk, get(p + "self_attn.k_proj.weight"));
    SS_ASSIGN_OR_RETURN(lw.wv, get(p + "self_attn.v_proj.weight"));
    SS_ASSIGN_OR_RETURN(lw.wo, get(p + "self_attn.o_proj.weight"));
    SS_ASSIGN_OR_RETURN(lw.ffn_norm, get(p + "post_attention_layernorm.weight"));
    SS_ASSIGN_OR_RETURN(lw.w_gate, get(p + "mlp.gate_proj.weight"));
    SS_ASSIGN_OR_RETURN(lw.w_up, get(p + "mlp.up_proj.weight"));
    SS_ASSIGN_OR_RETURN(lw.w_down, get(p + "mlp.down_proj.weight"));
    if (qkv_bias) {
      SS_ASSIGN_OR_RETURN(lw.bq, get(p + "self_attn.q_proj.bias"));
      SS_ASSIGN_OR_RETURN(lw.bk, get(p + "self_attn.k_proj.bias"));
      SS_ASSIGN_OR_RETURN(lw.bv, get(p + "self_attn.v_proj.bias"));
    }
    m->layers.push_back(std::move(lw));
  }
  m->keep_alive.push_back(st_ptr);
  return m;
}

}  // namespace ss
