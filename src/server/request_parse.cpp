#include "server/request_parse.h"

#include <nlohmann/json.hpp>
#include <random>

#include "server/scheduler.h"

namespace ss {

namespace {

using nlohmann::json;

// Fields shared by both completion endpoints; returns an error message or "".
std::string parse_common(const json& j, GenerationRequest& r, int64_t max_tokens_limit, bool& stream) {
  auto num = [&](const char* k, double lo, double hi, double& out) -> std::string {
    if (!j.contains(k) || j[k].is_null()) return "";
    if (!j[k].is_number()) return std::string("'") + k + "' must be a number";
    out = j[k].get<double>();
    if (!(out >= lo && out <= hi)) return std::string("'") + k + "' is out of range";
    return "";
  };
  double temp = 1.0, top_p = 1.0;
  if (auto e = num("temperature", 0, 2, temp); !e.empty()) return e;
  if (auto e = num("top_p", 0, 1, top_p); !e.empty()) return e;
  if (top_p <= 0) return "'top_p' must be > 0";
  r.sampling.temperature = static_cast<float>(temp);
  r.sampling.top_p = static_cast<float>(top_p);
  r.sampling.top_k = 0;
  r.sampling.min_p = 0;
  r.sampling.seed = std::random_device{}();
  if (j.contains("seed") && !j["seed"].is_null()) {
    if (!j["seed"].is_number_integer()) return "'seed' must be an integer";
    r.sampling.seed = static_cast<uint64_t>(j["seed"].get<int64_t>());
  }
  if (j.contains("max_tokens") && !j["max_tokens"].is_null()) {
    if (!j["max_tokens"].is_number_integer()) return "'max_tokens' must be an integer";
    r.max_tokens = j["max_tokens"].get<int64_t>();
    if (r.max_tokens < 0) return "'max_tokens' must be >= 0";
  }
  if (max_tokens_limit > 0 && (r.max_tokens < 0 || r.max_tokens > max_tokens_limit)) r.max_tokens = max_tokens_limit;
  if (j.contains("stop") && !j["stop"].is_null()) {
    if (j["stop"].is_string())
      r.stop.push_back(j["stop"].get<std::string>());
    else if (j["stop"].is_array() && j["stop"].size() <= 4) {
      for (const auto& s : j["stop"]) {
        if (!s.is_string()) return "'stop' must be a string or an array of strings";
        r.stop.push_back(s.get<std::string>());
      }
    } else {
      return "'stop' must be a string or an array of up to 4 strings";
    }
  }
  if (j.contains("n") && !j["n"].is_null()) {
    if (!j["n"].is_number_integer() || j["n"].get<int64_t>() < 1) return "'n' must be a positive integer";
    if (j["n"].get<int64_t>() != 1) return "'n' > 1 is not supported: one choice per request (send n requests)";
  }
  if (j.contains("ignore_eos") && !j["ignore_eos"].is_null()) {
    if (!j["ignore_eos"].is_boolean()) return "'ignore_eos' must be a boolean";
    r.ignore_eos = j["ignore_eos"].get<bool>();
  }
  stream = false;
  if (j.contains("stream") && !j["stream"].is_null()) {
    if (!j["stream"].is_boolean()) return "'stream' must be a boolean";
    stream = j["stream"].get<bool>();
  }
  return "";
}

// A message's text: a string, or OpenAI's array of content parts, whose text
// parts are joined with newlines (as vLLM does); other part types (images,
// audio) are refused. An assistant message may have null content.
std::string message_text(const json& m, const std::string& role, std::string& out) {
  if (!m.contains("content") || m["content"].is_null()) {
    if (role == "assistant") return "";
    return "each message needs 'content' (a string or an array of text parts)";
  }
  const json& c = m["content"];
  if (c.is_string()) {
    out = c.get<std::string>();
    return "";
  }
  if (!c.is_array()) return "'content' must be a string or an array of content parts";
  for (const auto& part : c) {
    if (!part.is_object() || !part.contains("type") || !part["type"].is_string())
      return "each content part needs a string 'type'";
    const std::string type = part["type"].get<std::string>();
    if (type != "text") return "content part type '" + type + "' is not supported (text only)";
    if (!part.contains("text") || !part["text"].is_string()) return "a text content part needs a string 'text'";
    if (!out.empty()) out += '\n';
    out += part["text"].get<std::string>();
  }
  return "";
}

}  // namespace

bool parse_completion_body(const std::string& body, bool chat, int64_t max_tokens_limit, CompletionRequest& out,
                           RequestError& err) {
  const json j = json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    err = {"request body is not a JSON object", ""};
    return false;
  }
  GenerationRequest gr;
  if (auto e = parse_common(j, gr, max_tokens_limit, out.stream); !e.empty()) {
    err = {e, ""};
    return false;
  }
  out.chat = chat;
  out.sampling = gr.sampling;
  out.max_tokens = gr.max_tokens;
  out.stop = gr.stop;
  out.ignore_eos = gr.ignore_eos;
  if (j.contains("session_id") && !j["session_id"].is_null()) {
    if (!j["session_id"].is_string()) {
      err = {"'session_id' must be a string", "session_id"};
      return false;
    }
    out.session_id = j["session_id"].get<std::string>();
  }
  if (chat) {
    if (!j.contains("messages") || !j["messages"].is_array() || j["messages"].empty()) {
      err = {"'messages' must be a non-empty array", "messages"};
      return false;
    }
    for (const auto& m : j["messages"]) {
      if (!m.is_object() || !m.contains("role") || !m["role"].is_string()) {
        err = {"each message needs a string 'role'", "messages"};
        return false;
      }
      std::string role = m["role"].get<std::string>();
      if (role == "developer") role = "system";  // OpenAI's newer name for the system message
      if (role != "system" && role != "user" && role != "assistant") {
        err = {"unknown role '" + role + "'", "messages"};
        return false;
      }
      std::string content;
      if (auto e = message_text(m, role, content); !e.empty()) {
        err = {e, "messages"};
        return false;
      }
      out.messages.push_back({role, std::move(content)});
    }
  } else {
    if (!j.contains("prompt") || !j["prompt"].is_string()) {
      err = {"'prompt' must be a string", "prompt"};
      return false;
    }
    out.prompt = j["prompt"].get<std::string>();
  }
  return true;
}

}  // namespace ss
