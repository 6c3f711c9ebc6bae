#include "server/request_parse.h"

#include <charconv>
#include <climits>
#include <nlohmann/json.hpp>
#include <random>
#include <unordered_map>

#include "sample/regex_to_gbnf.h"
#include "server/json_fields.h"
#include "server/scheduler.h"
#include "server/tool_calls.h"

namespace ss {

namespace {

using nlohmann::json;

using json_fields::given;

// OpenAI's logit_bias: {"token id": bias in [-100, 100]}, at most 300
// entries. Ids are checked against the vocabulary at submission.
std::string parse_logit_bias(const json& j, SamplingParams& s) {
  if (!given(j, "logit_bias")) return "";
  const json& b = j["logit_bias"];
  if (!b.is_object()) return "'logit_bias' must be an object of token id -> bias";
  if (b.size() > 300) return "'logit_bias' has more than 300 entries";
  for (const auto& [key, value] : b.items()) {
    int64_t id = -1;
    const auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), id);
    if (ec != std::errc() || end != key.data() + key.size() || id < 0 || id > INT32_MAX)
      return "'logit_bias' keys must be token ids (non-negative integers), not '" + key + "'";
    if (!value.is_number()) return "'logit_bias' values must be numbers";
    const double v = value.get<double>();
    if (!(v >= -100 && v <= 100)) return "'logit_bias' values must be in [-100, 100]";
    s.logit_bias.emplace_back(static_cast<int32_t>(id), static_cast<float>(v));
  }
  return "";
}

// Chat: logprobs (bool) and top_logprobs (0-20, only with logprobs);
// completions: logprobs as the number of alternatives (0-20). -1: off.
std::string parse_logprobs(const json& j, bool chat, int& out) {
  out = -1;
  const bool has = given(j, "logprobs");
  const bool has_top = given(j, "top_logprobs");
  const std::string range = "[0, " + std::to_string(kMaxTopLogprobs) + "]";
  if (chat) {
    if (has && !j["logprobs"].is_boolean()) return "'logprobs' must be a boolean";
    const bool on = has && j["logprobs"].get<bool>();
    if (has_top) {
      if (!on) return "'top_logprobs' needs 'logprobs': true";
      if (!j["top_logprobs"].is_number_integer()) return "'top_logprobs' must be an integer";
      const int64_t n = j["top_logprobs"].get<int64_t>();
      if (n < 0 || n > kMaxTopLogprobs) return "'top_logprobs' must be in " + range;
      out = static_cast<int>(n);
    } else if (on) {
      out = 0;
    }
    return "";
  }
  if (has_top) return "'top_logprobs' is a chat field; completions take 'logprobs': N";
  if (!has) return "";
  if (!j["logprobs"].is_number_integer()) return "'logprobs' must be an integer (alternatives per token)";
  const int64_t n = j["logprobs"].get<int64_t>();
  if (n < 0 || n > kMaxTopLogprobs) return "'logprobs' must be in " + range;
  out = static_cast<int>(n);
  return "";
}

// One prompt: a string or an array of token ids.
std::string parse_one_prompt(const json& p, CompletionRequest::Prompt& out) {
  if (p.is_string()) {
    out.text = p.get<std::string>();
    return "";
  }
  if (!p.is_array()) return "each prompt must be a string or an array of token ids";
  for (const json& t : p) {
    if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() > INT32_MAX)
      return "'prompt' token ids must be non-negative integers";
    out.ids.push_back(static_cast<int32_t>(t.get<int64_t>()));
  }
  out.is_ids = true;
  return "";
}

// OpenAI's prompt forms: a string, token ids, or a list of strings or of
// token-id lists (several prompts, what lm-evaluation-harness batches).
std::string parse_prompts(const json& j, CompletionRequest& out) {
  if (!j.contains("prompt")) return "'prompt' is required";
  const json& p = j["prompt"];
  const bool list = p.is_array() && !p.empty() && (p[0].is_string() || p[0].is_array());
  if (!list) {
    out.prompts.emplace_back();
    return parse_one_prompt(p, out.prompts.back());
  }
  if (p.size() > static_cast<size_t>(kMaxChoices))
    return "at most " + std::to_string(kMaxChoices) + " prompts per request";
  for (const json& one : p) {
    if (!one.is_string() && !one.is_array()) return "a list of prompts holds strings or arrays of token ids";
    out.prompts.emplace_back();
    if (auto e = parse_one_prompt(one, out.prompts.back()); !e.empty()) return e;
  }
  return "";
}

// OpenAI fields whose meaning this server does not implement are refused
// when they ask for something, rather than silently ignored: a client that
// asks for JSON output or tool calls must not get free text it trusts.
std::string refuse_unsupported(const json& j, bool chat) {
  if (given(j, "functions") && !(j["functions"].is_array() && j["functions"].empty()))
    return "'functions' (OpenAI's deprecated form) is not supported: send 'tools'";
  if (!chat && given(j, "tools") && !(j["tools"].is_array() && j["tools"].empty()))
    return "'tools' (tool calls) are a chat field: send them to /v1/chat/completions";
  if (!chat && given(j, "tool_choice") && j["tool_choice"] != "none" && j["tool_choice"] != "auto")
    return "'tool_choice' is a chat field: send it to /v1/chat/completions";
  if (!chat && given(j, "suffix") && !(j["suffix"].is_string() && j["suffix"].get<std::string>().empty()))
    return "'suffix' (insertion) is not supported";
  if (given(j, "best_of") && !(j["best_of"].is_number_integer() && j["best_of"].get<int64_t>() <= 1))
    return "'best_of' > 1 is not supported (ask for 'n' choices and score them with 'logprobs')";
  return "";
}

enum class ShapeKind { Schema, Grammar, Choice, Regex };
struct ShapeWay {  // a field that gives the answer's shape
  std::string name;
  ShapeKind kind;
  const json* value;
};

// A grammar, choice list or regex, as the GBNF grammar the matcher runs.
std::string compile_grammar(const ShapeWay& way, std::shared_ptr<const Gbnf>& grammar, const GbnfTokens* tokens) {
  Result<std::shared_ptr<const Gbnf>> g = make_error("");
  if (way.kind == ShapeKind::Choice) {
    const json& c = *way.value;
    const std::string kList =
        "'" + way.name + "' must be a non-empty array of strings (at most " + std::to_string(kMaxChoicesListed) + ")";
    if (!c.is_array() || c.empty() || c.size() > kMaxChoicesListed) return kList;
    std::vector<std::string> choices;
    for (const auto& e : c) {
      if (!e.is_string()) return kList;
      choices.push_back(e.get<std::string>());
    }
    g = Gbnf::choice(choices);
  } else {
    const bool regex = way.kind == ShapeKind::Regex;
    if (!way.value->is_string())
      return "'" + way.name + "' must be a string (" + (regex ? "a regular expression" : "a GBNF grammar") + ")";
    std::string text = way.value->get<std::string>();
    if (regex) {
      auto r = regex_to_gbnf(text);
      if (!r.ok()) return "'" + way.name + "': " + r.error().message;
      text = r.value();
    }
    g = Gbnf::parse(text, regex ? nullptr : tokens);
  }
  if (!g.ok()) return "'" + way.name + "': " + g.error().message;
  grammar = *g;
  return "";
}

// The answer's shape, given one way: response_format {"type": "text"},
// {"type": "json_object"} (llama.cpp also takes a "schema" there) or
// OpenAI's {"type": "json_schema", "json_schema": {"name": ..., "schema":
// {...}, "strict": ...}}; llama.cpp's top-level "json_schema" and GBNF
// "grammar"; vLLM's "guided_json" (an object, or its JSON text),
// "guided_grammar" (GBNF, as xgrammar reads it), "guided_choice" and
// "guided_regex" (the whole answer matches it; regex_to_gbnf.h) and
// "structured_outputs": {"json" | "grammar" | "choice" | "regex": ...}. A
// schema, grammar or regex that does not compile is the client's error,
// named with its place.
std::string parse_response_format(const json& j, std::shared_ptr<const JsonSchema>& out,
                                  std::shared_ptr<const Gbnf>& grammar, const GbnfTokens* tokens) {
  out.reset();
  grammar.reset();
  using K = ShapeKind;
  std::vector<ShapeWay> ways;  // where a shape is given
  for (const char* k : {"json_schema", "guided_json"})
    if (given(j, k)) ways.push_back({k, K::Schema, &j[k]});
  for (const char* k : {"grammar", "guided_grammar"})  // an empty grammar is none, as in llama.cpp
    if (given(j, k) && !(j[k].is_string() && j[k].get_ref<const std::string&>().empty()))
      ways.push_back({k, K::Grammar, &j[k]});
  if (given(j, "guided_choice")) ways.push_back({"guided_choice", K::Choice, &j["guided_choice"]});
  if (given(j, "guided_regex")) ways.push_back({"guided_regex", K::Regex, &j["guided_regex"]});
  if (given(j, "structured_outputs")) {
    const json& so = j["structured_outputs"];
    const size_t before = ways.size();
    if (so.is_object() && so.size() == 1)
      for (const auto& [key, kind] : {std::pair{"json", K::Schema}, std::pair{"grammar", K::Grammar},
                                      std::pair{"choice", K::Choice}, std::pair{"regex", K::Regex}})
        if (so.contains(key)) ways.push_back({"structured_outputs", kind, &so[key]});
    if (ways.size() == before)
      return "'structured_outputs' takes one of {\"json\": ...}, {\"grammar\": ...}, {\"choice\": [...]}, "
             "{\"regex\": ...}";
  }
  const json* format_schema = nullptr;  // response_format's own schema
  if (given(j, "response_format")) {
    const json& f = j["response_format"];
    if (!(f.is_object() && f.contains("type") && f["type"] == "text")) {
      if (!ways.empty()) return "give one of '" + ways[0].name + "' and 'response_format'";
      const std::string kShapes =
          "'response_format' must be {\"type\": \"text\"}, {\"type\": \"json_object\"} or {\"type\": "
          "\"json_schema\", \"json_schema\": {\"schema\": {...}}}";
      if (!f.is_object() || !f.contains("type") || !f["type"].is_string()) return kShapes;
      if (f["type"] == "json_object") {
        if (!f.contains("schema")) {
          out = JsonSchema::any_object();
          return "";
        }
        format_schema = &f["schema"];
      } else if (f["type"] == "json_schema" && f.contains("json_schema") && f["json_schema"].is_object() &&
                 f["json_schema"].contains("schema")) {
        format_schema = &f["json_schema"]["schema"];
      } else {
        return kShapes;
      }
    }
  }
  if (ways.size() > 1) return "give one of '" + ways[0].name + "' and '" + ways[1].name + "'";
  if (!format_schema && ways.empty()) return "";
  if (!format_schema && ways[0].kind != K::Schema) return compile_grammar(ways[0], grammar, tokens);
  json schema = format_schema ? *format_schema : *ways[0].value;
  if (!format_schema && schema.is_string()) {
    schema = json::parse(schema.get<std::string>(), nullptr, false);
    if (schema.is_discarded()) return "'" + ways[0].name + "' is a string that is not JSON";
  }
  auto compiled = JsonSchema::compile(schema);
  if (!compiled.ok()) return compiled.error().message;
  out = *compiled;
  return "";
}

// Fields shared by both completion endpoints; returns an error message or "".
std::string parse_common(const json& j, GenerationRequest& r, int64_t max_tokens_limit, bool& stream, int& n) {
  auto num = [&](const char* k, double lo, double hi, double& out) -> std::string {
    if (!given(j, k)) return "";
    if (!j[k].is_number()) return std::string("'") + k + "' must be a number";
    out = j[k].get<double>();
    if (!(out >= lo && out <= hi)) return std::string("'") + k + "' is out of range";
    return "";
  };
  auto integer = [&](const char* k, int64_t lo, int64_t hi, int64_t& out) -> std::string {
    if (!given(j, k)) return "";
    if (!j[k].is_number_integer()) return std::string("'") + k + "' must be an integer";
    out = j[k].get<int64_t>();
    if (out < lo || out > hi)
      return std::string("'") + k + "' must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
    return "";
  };
  SamplingParams& s = r.sampling;
  // OpenAI's defaults (no top-k / min-p filter, no penalty) unless asked:
  // the llama.cpp / vLLM extensions top_k, min_p, repeat_penalty
  // (repetition_penalty) and repeat_last_n are read too.
  double temp = 1.0, top_p = 1.0, min_p = 0, repeat = 1, freq = 0, presence = 0;
  int64_t top_k = 0, last_n = s.repeat_last_n;
  if (auto e = num("temperature", 0, 2, temp); !e.empty()) return e;
  if (auto e = num("top_p", 0, 1, top_p); !e.empty()) return e;
  if (top_p <= 0) return "'top_p' must be > 0";
  if (auto e = integer("top_k", -1, INT32_MAX, top_k); !e.empty()) return e;
  if (auto e = num("min_p", 0, 1, min_p); !e.empty()) return e;
  if (given(j, "repeat_penalty") && given(j, "repetition_penalty"))
    return "give 'repeat_penalty' or 'repetition_penalty', not both";
  const char* repeat_key = given(j, "repetition_penalty") ? "repetition_penalty" : "repeat_penalty";
  if (auto e = num(repeat_key, 0, 10, repeat); !e.empty()) return e;
  if (repeat <= 0) return std::string("'") + repeat_key + "' must be > 0";
  if (auto e = integer("repeat_last_n", 0, kMaxPenaltyWindow, last_n); !e.empty()) return e;
  if (auto e = num("frequency_penalty", -2, 2, freq); !e.empty()) return e;
  if (auto e = num("presence_penalty", -2, 2, presence); !e.empty()) return e;
  s.temperature = static_cast<float>(temp);
  s.top_p = static_cast<float>(top_p);
  s.top_k = static_cast<int>(std::max<int64_t>(top_k, 0));
  s.min_p = static_cast<float>(min_p);
  s.repeat_penalty = static_cast<float>(repeat);
  s.repeat_last_n = static_cast<int>(last_n);
  s.frequency_penalty = static_cast<float>(freq);
  s.presence_penalty = static_cast<float>(presence);
  if (auto e = parse_logit_bias(j, s); !e.empty()) return e;
  s.seed = std::random_device{}();
  if (given(j, "seed")) {
    if (!j["seed"].is_number_integer()) return "'seed' must be an integer";
    s.seed = static_cast<uint64_t>(j["seed"].get<int64_t>());
  }
  // max_completion_tokens is OpenAI's newer name; it wins where both are sent.
  const char* max_key = given(j, "max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
  if (given(j, max_key)) {
    if (!j[max_key].is_number_integer()) return std::string("'") + max_key + "' must be an integer";
    r.max_tokens = j[max_key].get<int64_t>();
    if (r.max_tokens < 0) return std::string("'") + max_key + "' must be >= 0";
  }
  if (max_tokens_limit > 0 && (r.max_tokens < 0 || r.max_tokens > max_tokens_limit)) r.max_tokens = max_tokens_limit;
  if (given(j, "stop")) {
    if (j["stop"].is_string())
      r.stop.push_back(j["stop"].get<std::string>());
    else if (j["stop"].is_array() && j["stop"].size() <= static_cast<size_t>(kMaxStops)) {
      for (const auto& s : j["stop"]) {
        if (!s.is_string()) return "'stop' must be a string or an array of strings";
        r.stop.push_back(s.get<std::string>());
      }
    } else {
      return "'stop' must be a string or an array of up to " + std::to_string(kMaxStops) + " strings";
    }
  }
  if (given(j, "n")) {
    if (!j["n"].is_number_integer() || j["n"].get<int64_t>() < 1 || j["n"].get<int64_t>() > kMaxChoices)
      return "'n' must be an integer in [1, " + std::to_string(kMaxChoices) + "]";
    n = static_cast<int>(j["n"].get<int64_t>());
  }
  if (given(j, "ignore_eos")) {
    if (!j["ignore_eos"].is_boolean()) return "'ignore_eos' must be a boolean";
    r.ignore_eos = j["ignore_eos"].get<bool>();
  }
  stream = false;
  if (given(j, "stream")) {
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
                           RequestError& err, const GbnfTokens* tokens) {
  const json j = json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    err = {"request body is not a JSON object", ""};
    return false;
  }
  GenerationRequest gr;
  if (auto e = parse_common(j, gr, max_tokens_limit, out.stream, out.n); !e.empty()) {
    err = {e, ""};
    return false;
  }
  if (auto e = refuse_unsupported(j, chat); !e.empty()) {
    err = {e, ""};
    return false;
  }
  if (auto e = parse_logprobs(j, chat, out.logprobs); !e.empty()) {
    err = {e, chat ? "top_logprobs" : "logprobs"};
    return false;
  }
  if (!chat && given(j, "echo")) {
    if (!j["echo"].is_boolean()) {
      err = {"'echo' must be a boolean", "echo"};
      return false;
    }
    out.echo = j["echo"].get<bool>();
  }
  if (auto e = parse_response_format(j, out.json_schema, out.grammar, tokens); !e.empty()) {
    err = {e, "response_format"};
    return false;
  }
  out.chat = chat;
  out.sampling = gr.sampling;
  out.max_tokens = gr.max_tokens;
  out.stop = gr.stop;
  out.ignore_eos = gr.ignore_eos;
  if (given(j, "session_id")) {
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
    // Earlier calls are written in the form this answer's calls take.
    const bool parallel_calls = parallel_tool_calls(j);
    std::unordered_map<std::string, std::string> call_names;  // call id -> function, for the results
    for (const auto& m : j["messages"]) {
      if (!m.is_object() || !m.contains("role") || !m["role"].is_string()) {
        err = {"each message needs a string 'role'", "messages"};
        return false;
      }
      std::string role = m["role"].get<std::string>();
      if (role == "developer") role = "system";  // OpenAI's newer name for the system message
      if (role != "system" && role != "user" && role != "assistant" && role != "tool") {
        err = {"unknown role '" + role + "'", "messages"};
        return false;
      }
      ChatMessage msg{role, ""};
      if (auto e = message_text(m, role, msg.content); !e.empty()) {
        err = {e, "messages"};
        return false;
      }
      // Tool results and the assistant's earlier calls, as the model reads them.
      if (auto e = tool_history_message(m, msg, parallel_calls, call_names); !e.empty()) {
        err = {e, "messages"};
        return false;
      }
      out.messages.push_back(std::move(msg));
    }
    ToolSetup tools;
    if (auto e = parse_tools(j, tools); !e.empty()) {
      err = {e, "tools"};
      return false;
    }
    if (tools.active()) {
      if (out.json_schema || out.grammar) {
        err = {"give one of 'tools' and a response format, schema or grammar", "tools"};
        return false;
      }
      auto schema = tools_schema(tools);
      if (!schema.ok()) {
        err = {schema.error().message, "tools"};
        return false;
      }
      out.json_schema = schema.value();
      out.tool_calls = true;
      out.tools_text = tools_system_text(tools);
      out.tools = tools;
    }
  } else {
    if (auto e = parse_prompts(j, out); !e.empty()) {
      err = {e, "prompt"};
      return false;
    }
    if (out.prompts.size() * static_cast<size_t>(out.n) > static_cast<size_t>(kMaxChoices)) {
      err = {"prompts x n is more than " + std::to_string(kMaxChoices) + " choices", "n"};
      return false;
    }
  }
  return true;
}

}  // namespace ss
