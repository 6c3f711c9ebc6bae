#include "model/hf_config.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "util/mapped_file.h"

namespace ss {

using nlohmann::json;

namespace {

json read_json(const std::string& path) {
  auto text = read_text_file(path);
  if (!text.ok()) return json();
  json j = json::parse(text.value(), nullptr, false);
  return j.is_discarded() || !j.is_object() ? json() : j;
}

}  // namespace

std::string hf_chat_template(const std::string& dir) {
  const json j = read_json(dir + "/tokenizer_config.json");
  if (!j.is_object() || !j.contains("chat_template")) {
    if (auto text = read_text_file(dir + "/chat_template.jinja"); text.ok()) return text.value();
    const json alt = read_json(dir + "/chat_template.json");
    return alt.is_object() && alt.contains("chat_template") && alt["chat_template"].is_string()
               ? alt["chat_template"].get<std::string>()
               : "";
  }
  const json& t = j["chat_template"];
  if (t.is_string()) return t.get<std::string>();
  if (t.is_array())
    for (const auto& e : t)
      if (e.is_object() && e.value("name", "") == "default" && e.contains("template") && e["template"].is_string())
        return e["template"].get<std::string>();
  return "";
}

std::vector<int32_t> hf_eos_ids(const std::string& dir, int64_t n_vocab) {
  std::vector<int32_t> ids;
  auto take = [&](const json& x) {
    if (!x.is_number_integer()) return;
    const auto id = x.get<int64_t>();
    if (id < 0 || id >= n_vocab) return;
    if (std::find(ids.begin(), ids.end(), static_cast<int32_t>(id)) == ids.end())
      ids.push_back(static_cast<int32_t>(id));
  };
  for (const char* file : {"/config.json", "/generation_config.json"}) {
    const json j = read_json(dir + file);
    if (!j.is_object() || !j.contains("eos_token_id")) continue;
    const json& e = j["eos_token_id"];
    if (e.is_array())
      for (const auto& x : e) take(x);
    else
      take(e);
  }
  return ids;
}

}  // namespace ss
