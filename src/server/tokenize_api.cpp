#include "server/tokenize_api.h"

#include <nlohmann/json.hpp>

namespace ss {

namespace {

using nlohmann::json;

HttpReply bad(const std::string& message, const std::string& param) { return error_reply({400, message, param}); }

// A boolean field, absent or null meaning `fallback`; false with err set if mistyped.
bool flag(const json& j, const char* key, bool fallback, std::string& err) {
  if (!j.contains(key) || j[key].is_null()) return fallback;
  if (!j[key].is_boolean()) {
    err = std::string("'") + key + "' must be a boolean";
    return false;
  }
  return j[key].get<bool>();
}

std::string token_text(const Vocab& v, int32_t id) {
  return id >= 0 && id < v.size() ? v.pieces[static_cast<size_t>(id)] : std::string();
}

}  // namespace

HttpReply tokenize_reply(const Tokenizer& tok, const Model& model, const std::string& body) {
  const json j = json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return bad("request body is not a JSON object", "");
  // vLLM names the text "prompt" and adds special tokens unless told not
  // to; llama.cpp names it "content" and adds them only when asked.
  const bool vllm = j.contains("prompt");
  const char* text_key = vllm ? "prompt" : "content";
  if (!j.contains(text_key) || !j[text_key].is_string())
    return bad("'prompt' (or 'content') must be a string", text_key);
  std::string err;
  const bool add_special = vllm ? flag(j, "add_special_tokens", true, err) : flag(j, "add_special", false, err);
  const bool parse_special = flag(j, "parse_special", true, err);
  const bool with_pieces = flag(j, "with_pieces", false, err);
  if (!err.empty()) return bad(err, "");
  const std::vector<int32_t> ids =
      tok.encode(j[text_key].get<std::string>(), add_special && model.vocab.add_bos, parse_special);
  json tokens = json::array();
  for (int32_t id : ids) {
    if (with_pieces)
      tokens.push_back({{"id", id}, {"piece", tok.token_bytes(id)}});
    else
      tokens.push_back(id);
  }
  return json_reply({{"tokens", tokens}, {"count", ids.size()}, {"max_model_len", model.config.trained_context}});
}

HttpReply detokenize_reply(const Tokenizer& tok, const std::string& body) {
  const json j = json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return bad("request body is not a JSON object", "");
  if (!j.contains("tokens") || !j["tokens"].is_array()) return bad("'tokens' must be an array of token ids", "tokens");
  std::vector<int32_t> ids;
  const int64_t n_vocab = tok.vocab().size();
  for (const json& t : j["tokens"]) {
    if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= n_vocab)
      return bad("'tokens' must be ids in [0, " + std::to_string(n_vocab - 1) + "]", "tokens");
    ids.push_back(static_cast<int32_t>(t.get<int64_t>()));
  }
  const std::string text = tok.decode(ids);
  return json_reply({{"prompt", text}, {"content", text}});
}

HttpReply tokenizer_info_reply(const Model& model) {
  const Vocab& v = model.vocab;
  auto named = [&](int32_t id) { return id >= 0 ? json(token_text(v, id)) : json(nullptr); };
  json info = {{"tokenizer_class", "sinkstream"}, {"eos_token", named(v.eos)},
               {"bos_token", named(v.bos)},       {"pad_token", nullptr},
               {"unk_token", named(v.unk)},       {"add_bos_token", v.add_bos},
               {"vocab_size", v.size()},          {"model_max_length", model.config.trained_context}};
  info["chat_template"] = v.chat_template.empty() ? json(nullptr) : json(v.chat_template);
  return json_reply(info);
}

}  // namespace ss
