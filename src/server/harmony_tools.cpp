#include "server/harmony_tools.h"

#include "server/harmony_markers.h"
#include "server/harmony_split.h"

namespace ss {

using nlohmann::json;

namespace {

bool flag(const json& s, const char* key) { return s.contains(key) && s[key].is_boolean() && s[key].get<bool>(); }

std::string text_of(const json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

bool required_in(const json& schema, const std::string& name) {
  if (!schema.contains("required") || !schema["required"].is_array()) return false;
  for (const json& r : schema["required"])
    if (r == name) return true;
  return false;
}

constexpr std::string_view kTo = "to=functions.";

// The tool name after "to=functions." in a header (up to a space or marker).
std::string_view called_name(std::string_view header) {
  const size_t to = header.rfind(kTo);
  if (to == std::string_view::npos) return {};
  std::string_view name = header.substr(to + kTo.size());
  return name.substr(0, std::min(name.find(' '), name.find('<')));
}

}  // namespace

std::string harmony_typescript_type(const json& s) {
  if (!s.is_object()) return "any";
  const json type = s.value("type", json());
  const std::string null = flag(s, "nullable") ? " | null" : "";
  if (type == "array") {
    if (!s.contains("items") || !s["items"].is_object() || s["items"].empty()) return "any[]" + null;
    const json item = s["items"].value("type", json());
    if (item == "string") return "string[]" + null;
    if (item == "number" || item == "integer") return "number[]" + null;
    if (item == "boolean") return "boolean[]" + null;
    const std::string inner = harmony_typescript_type(s["items"]);
    return (inner == "object | object" || inner.size() > 50 ? "any[]" : inner + "[]") + null;
  }
  if (type.is_array() && !type.empty()) {
    std::string out;
    for (const json& t : type) out += (out.empty() ? "" : " | ") + text_of(t);
    return out;
  }
  if (s.contains("oneOf") && s["oneOf"].is_array() && !s["oneOf"].empty()) {
    const json& variants = s["oneOf"];
    bool objects = false;
    for (const json& v : variants) objects = objects || (v.is_object() && v.value("type", json()) == "object");
    if (objects && variants.size() > 1) return "any";
    std::string out;
    for (size_t i = 0; i < variants.size(); ++i) {
      out += harmony_typescript_type(variants[i]);
      if (variants[i].is_object() && variants[i].contains("description"))
        out += "// " + text_of(variants[i]["description"]);
      if (i + 1 < variants.size()) out += " | ";
    }
    return out;
  }
  if (type == "string") {
    if (s.contains("enum") && s["enum"].is_array() && !s["enum"].empty()) {
      std::string out;
      for (const json& e : s["enum"]) out += std::string(out.empty() ? "" : " | ") + "\"" + text_of(e) + "\"";
      return out;
    }
    return "string" + null;
  }
  if (type == "number" || type == "integer") return "number";
  if (type == "boolean") return "boolean";
  if (type == "object") {
    if (!s.contains("properties") || !s["properties"].is_object() || s["properties"].empty()) return "object";
    std::string out = "{\n";
    bool first = true;
    for (const auto& [name, prop] : s["properties"].items()) {
      if (!first) out += ", ";
      first = false;
      // The template's own whitespace before the nested type.
      out += name + (required_in(s, name) ? "" : "?") + ": \n                " + harmony_typescript_type(prop);
    }
    return out + "}";
  }
  return "any";
}

std::string harmony_tools_namespace(const ToolSetup& t) {
  std::string out = "## functions\n\nnamespace functions {\n\n";
  for (const ToolSetup::Tool& tool : t.tools) {
    out += "// " + tool.description + "\ntype " + tool.name + " = ";
    const json& params = tool.parameters;
    if (!params.is_object() || !params.contains("properties") || !params["properties"].is_object() ||
        params["properties"].empty()) {
      out += "() => any;\n\n";
      continue;
    }
    out += "(_: {\n";
    for (const auto& [name, spec] : params["properties"].items()) {
      if (spec.is_object() && spec.contains("description")) out += "// " + text_of(spec["description"]) + "\n";
      out += name + (required_in(params, name) ? "" : "?") + ": " + harmony_typescript_type(spec);
      if (spec.is_object() && spec.contains("default")) {
        if (spec.contains("enum"))
          out += ", // default: " + text_of(spec["default"]);
        else if (spec.contains("oneOf"))
          out += "// default: " + text_of(spec["default"]);
        else
          out += ", // default: " + spec["default"].dump();
      }
      out += ",\n";
    }
    out += "}) => any;\n\n";
  }
  return out + "} // namespace functions";
}

Result<ShapePlan> harmony_tool_plan(const ToolSetup& t) {
  ShapePlan plan;
  plan.exits.push_back({});  // the final channel: free text (tool_choice "auto")
  std::vector<std::string> names;
  std::string name_rule;
  for (const ToolSetup::Tool& tool : t.tools) {
    if (!t.forced.empty() && tool.name != t.forced) continue;
    if (!tool.schema) return make_error("tool '" + tool.name + "' has no compiled parameters");
    plan.exits.push_back({tool.schema, nullptr});  // compiled once, by parse_tools
    names.push_back(tool.name);
    // Tool names are [A-Za-z0-9_.-] (parse_tools): a literal as they are.
    name_rule += (name_rule.empty() ? "" : " | ") + ("\"" + tool.name + "\"");
  }
  if (names.empty()) return make_error("no tool to call");
  const std::string text =
      std::string("root ::= analysis? ") + (t.required ? "call" : "(call | final)") +
      "\n"
      "call ::= (\"<|channel|>commentary to=functions.\" name json-mark? | \" to=functions.\" name "
      "\"<|channel|>commentary\" json-mark?) \"<|message|>\"\n"
      "json-mark ::= \" <|constrain|>json\" | \" json\"\n"
      "name ::= " +
      name_rule + "\n" + harmony_analysis_rules();
  auto lead = Gbnf::parse(text);
  if (!lead.ok()) return make_error("tools: " + lead.error().message);
  plan.lead = *lead;
  plan.choose = [names](std::string_view lead_text) -> size_t {
    const std::string_view name = called_name(lead_text);
    for (size_t i = 0; i < names.size(); ++i)
      if (names[i] == name) return i + 1;
    return 0;
  };
  return plan;
}

json harmony_tool_reply_fields(const std::string& answer, std::string& finish, bool delta) {
  // The lead's shape: [<|channel|>analysis<|message|>...<|end|><|start|>assistant] header<|message|>body
  using harmony::kEnd, harmony::kMessage;
  constexpr std::string_view kAnalysis = "<|channel|>analysis<|message|>", kStart = "<|start|>assistant";
  std::string_view rest = answer;
  json out = json::object();
  if (rest.starts_with(kAnalysis)) {
    rest.remove_prefix(kAnalysis.size());
    const size_t end = rest.find(kEnd);
    out["reasoning_content"] = std::string(rest.substr(0, end));
    rest = end == std::string_view::npos ? std::string_view() : rest.substr(end + kEnd.size());
    if (rest.starts_with(kStart)) rest.remove_prefix(kStart.size());
  }
  const size_t at = rest.find(kMessage);
  const std::string_view header = rest.substr(0, at);
  std::string_view body = at == std::string_view::npos ? std::string_view() : rest.substr(at + kMessage.size());
  const std::string_view name = called_name(header);
  if (!name.empty()) {
    const json args = json::parse(body, nullptr, false);
    out["content"] = nullptr;
    if (args.is_object()) {
      json call = {{"id", new_call_id()},
                   {"type", "function"},
                   {"function", {{"name", std::string(name)}, {"arguments", args.dump()}}}};
      if (delta) call["index"] = 0;
      out["tool_calls"] = json::array({call});
      if (finish == "stop") finish = "tool_calls";
    }
    return out;  // a call cut short (max_tokens) is no call
  }
  body = body.substr(0, body.find(kEnd));
  out["content"] = std::string(body);
  return out;
}

}  // namespace ss
