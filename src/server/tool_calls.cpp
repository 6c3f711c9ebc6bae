#include "server/tool_calls.h"

#include <cctype>
#include <random>

#include "server/json_fields.h"
#include "server/json_text.h"

namespace ss {

using json_fields::given;
using nlohmann::json;

namespace {

bool valid_tool_name(const std::string& n) {
  if (n.empty() || n.size() > 64) return false;
  for (char c : n)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-' && c != '.') return false;
  return true;
}

// The parameters of tool i placed at #/$defs/__tool<i> of the answer's
// schema: their own references move with them.
void move_refs(json& s, const std::string& base) {
  if (s.is_object()) {
    for (auto& [k, v] : s.items()) {
      if (k == "$ref" && v.is_string() && !v.get<std::string>().empty() && v.get<std::string>()[0] == '#')
        v = "#" + base + v.get<std::string>().substr(1);
      else
        move_refs(v, base);
    }
  } else if (s.is_array()) {
    for (json& v : s) move_refs(v, base);
  }
}

}  // namespace

std::string new_call_id() {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  static const char* hex = "0123456789abcdef";
  std::string id = "call_";
  for (int i = 0; i < 24; ++i) id += hex[rng() % 16];
  return id;
}

bool parallel_tool_calls(const json& body) {
  return given(body, "parallel_tool_calls") && body["parallel_tool_calls"].is_boolean() &&
         body["parallel_tool_calls"].get<bool>();
}

std::string parse_tools(const json& j, ToolSetup& out) {
  static const char* kChoiceShapes =
      "'tool_choice' must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", \"function\": "
      "{\"name\": ...}}";
  out = ToolSetup{};
  const bool has_tools = given(j, "tools");
  if (given(j, "parallel_tool_calls") && !j["parallel_tool_calls"].is_boolean())
    return "'parallel_tool_calls' must be a boolean";
  out.parallel = parallel_tool_calls(j);
  if (has_tools) {
    const json& tools = j["tools"];
    JsonSchema::PatternBudget budget;  // all the tools' patterns together
    if (!tools.is_array()) return "'tools' must be an array of {\"type\": \"function\", \"function\": {...}}";
    if (tools.size() > static_cast<size_t>(kMaxTools)) return "at most " + std::to_string(kMaxTools) + " tools";
    for (const json& t : tools) {
      if (!t.is_object() || t.value("type", json()) != "function" || !t.contains("function") ||
          !t["function"].is_object())
        return "each tool must be {\"type\": \"function\", \"function\": {\"name\": ..., \"parameters\": ...}}";
      const json& f = t["function"];
      ToolSetup::Tool tool;
      if (!f.contains("name") || !f["name"].is_string() || !valid_tool_name(f["name"].get<std::string>()))
        return "a tool's 'name' must be 1-64 characters of [A-Za-z0-9_.-]";
      tool.name = f["name"].get<std::string>();
      for (const ToolSetup::Tool& seen : out.tools)
        if (seen.name == tool.name) return "two tools are named '" + tool.name + "'";
      if (given(f, "description")) {
        if (!f["description"].is_string()) return "tool '" + tool.name + "': 'description' must be a string";
        tool.description = f["description"].get<std::string>();
      }
      tool.parameters =
          given(f, "parameters") ? f["parameters"] : json{{"type", "object"}, {"properties", json::object()}};
      auto schema = JsonSchema::compile(tool.parameters, budget);
      if (!schema.ok()) return "tool '" + tool.name + "' parameters: " + schema.error().message;
      tool.schema = *schema;
      out.tools.push_back(std::move(tool));
    }
  }
  if (given(j, "tool_choice")) {
    const json& c = j["tool_choice"];
    if (c == "none") {
      out.tools.clear();
    } else if (c == "required") {
      out.required = true;
    } else if (c.is_object()) {
      if (c.value("type", json()) != "function" || !c.contains("function") || !c["function"].is_object() ||
          !c["function"].contains("name") || !c["function"]["name"].is_string())
        return kChoiceShapes;
      out.forced = c["function"]["name"].get<std::string>();
      out.required = true;
      bool known = false;
      for (const ToolSetup::Tool& t : out.tools) known = known || t.name == out.forced;
      if (!known) return "'tool_choice' names '" + out.forced + "', which is not among 'tools'";
    } else if (c != "auto") {
      return kChoiceShapes;
    }
    if (out.required && out.tools.empty()) return "'tool_choice' asks for a tool call, but 'tools' is empty";
  }
  return "";
}

std::string tools_system_text(const ToolSetup& t) {
  std::string s = "You can call these tools. Each takes one JSON object of arguments, described by its JSON schema.\n";
  for (const ToolSetup::Tool& tool : t.tools) {
    if (!t.forced.empty() && tool.name != t.forced) continue;
    s += "- " + tool.name;
    if (!tool.description.empty()) s += ": " + tool.description;
    s += "\n  arguments: " + tool.parameters.dump() + "\n";
  }
  if (t.parallel)
    s += "Reply with one JSON object: {\"tool_calls\": [{\"name\": \"<tool name>\", \"arguments\": {<arguments>}}, "
         "...]} to call one or more tools at once";
  else
    s += "Reply with one JSON object: {\"tool_call\": {\"name\": \"<tool name>\", \"arguments\": {<arguments>}}} to "
         "call a tool";
  s += t.required ? ".\n" : ", or {\"response\": \"<your reply>\"} to reply directly.\n";
  return s;
}

Result<std::shared_ptr<const JsonSchema>> tools_schema(const ToolSetup& t) {
  json doc = {{"$defs", json::object()}};
  json calls = json::array();
  for (size_t i = 0; i < t.tools.size(); ++i) {
    const ToolSetup::Tool& tool = t.tools[i];
    if (!t.forced.empty() && tool.name != t.forced) continue;
    const std::string slot = "__tool" + std::to_string(i);
    json params = tool.parameters;
    move_refs(params, "/$defs/" + slot);
    doc["$defs"][slot] = params;
    calls.push_back({{"type", "object"},
                     {"properties", {{"name", {{"const", tool.name}}}, {"arguments", {{"$ref", "#/$defs/" + slot}}}}},
                     {"required", {"name", "arguments"}}});
  }
  const json call = calls.size() == 1 ? calls[0] : json{{"anyOf", calls}};
  const json tool_call =
      t.parallel ? json{{"type", "object"},
                        {"properties",
                         {{"tool_calls",
                           {{"type", "array"}, {"items", call}, {"minItems", 1}, {"maxItems", kMaxParallelCalls}}}}},
                        {"required", {"tool_calls"}}}
                 : json{{"type", "object"}, {"properties", {{"tool_call", call}}}, {"required", {"tool_call"}}};
  if (t.required) {
    doc.update(tool_call);
  } else {
    doc["anyOf"] = {
        tool_call,
        {{"type", "object"}, {"properties", {{"response", {{"type", "string"}}}}}, {"required", {"response"}}}};
  }
  return JsonSchema::compile(doc);
}

std::string tool_history_message(const json& m, ChatMessage& out, bool parallel,
                                 std::unordered_map<std::string, std::string>& call_names) {
  const std::string role = out.role;
  if (role == "tool") {
    json response = {{"content", out.content}};
    std::string function;
    if (m.contains("tool_call_id") && m["tool_call_id"].is_string()) {
      response["tool_call_id"] = m["tool_call_id"];
      if (auto it = call_names.find(m["tool_call_id"].get<std::string>()); it != call_names.end())
        function = it->second;
    }
    if (m.contains("name") && m["name"].is_string()) {
      response["name"] = m["name"];
      function = m["name"].get<std::string>();
    }
    const std::string result = out.content;
    out = {"user", json{{"tool_response", response}}.dump()};
    out.result_of = function;
    out.result = result;
    return "";
  }
  if (role != "assistant" || !given(m, "tool_calls")) return "";
  const json& calls = m["tool_calls"];
  if (!calls.is_array()) return "an assistant message's 'tool_calls' must be an array";
  std::string text;
  json all = json::array();
  for (const json& c : calls) {
    if (!c.is_object() || !c.contains("function") || !c["function"].is_object() || !c["function"].contains("name") ||
        !c["function"]["name"].is_string())
      return "each tool call needs a 'function' with a 'name'";
    json args = json::object();
    if (c["function"].contains("arguments")) {
      const json& a = c["function"]["arguments"];
      args = a.is_string() ? json::parse(a.get<std::string>(), nullptr, false) : a;
      if (args.is_discarded()) return "a tool call's 'arguments' is a string that is not JSON";
    }
    const json call = {{"name", c["function"]["name"]}, {"arguments", args}};
    all.push_back(call);
    out.calls.push_back({c["function"]["name"].get<std::string>(), python_json_text(args)});
    if (c.contains("id") && c["id"].is_string())
      call_names[c["id"].get<std::string>()] = c["function"]["name"].get<std::string>();
    if (!text.empty()) text += "\n";
    text += json{{"tool_call", call}}.dump();
  }
  if (parallel && !all.empty()) text = json{{"tool_calls", all}}.dump();
  out.said = out.content;
  out.content = out.content.empty() ? text : out.content + "\n" + text;
  return "";
}

json tool_reply_fields(const std::string& answer, std::string& finish, bool delta) {
  const json v = json::parse(answer, nullptr, false);
  // {"tool_call": {...}}, or {"tool_calls": [{...}, ...]} (parallel calls).
  json written = json::array();
  if (v.is_object() && v.contains("tool_call")) written.push_back(v["tool_call"]);
  if (v.is_object() && v.contains("tool_calls") && v["tool_calls"].is_array()) written = v["tool_calls"];
  json calls = json::array();
  for (const json& c : written) {
    if (!c.is_object() || !c.contains("name") || !c["name"].is_string()) {
      calls.clear();
      break;
    }
    json call = {{"id", new_call_id()},
                 {"type", "function"},
                 {"function", {{"name", c["name"]}, {"arguments", c.value("arguments", json::object()).dump()}}}};
    if (delta) call["index"] = calls.size();
    calls.push_back(std::move(call));
  }
  if (!calls.empty()) {
    if (finish == "stop") finish = "tool_calls";
    return {{"content", nullptr}, {"tool_calls", calls}};
  }
  if (v.is_object() && v.contains("response") && v["response"].is_string()) return {{"content", v["response"]}};
  return {{"content", answer}};  // cut short (max_tokens): the raw text
}

}  // namespace ss
