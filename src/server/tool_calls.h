#pragma once
// OpenAI tool calls (chat `tools` / `tool_choice`) in llama.cpp's "generic"
// form, for chat templates of every family: the tools are described in the
// system message, and the answer is constrained (structured output) to one
// JSON object, {"tool_call": {"name": ..., "arguments": {...}}} or, where
// the model may answer instead (tool_choice "auto"), {"response": "..."}.
// The reply turns the former into `tool_calls` (finish_reason "tool_calls")
// and the latter into plain content. History goes back to the model the same
// way: an assistant message's tool_calls as the JSON it wrote, a `tool`
// message as a user message {"tool_response": {...}}. With
// parallel_tool_calls true (llama.cpp's default is false, as here) the call
// becomes {"tool_calls": [{"name": ..., "arguments": {...}}, ...]}: one to
// kMaxParallelCalls calls in one answer, as llama.cpp's generic form writes them.
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_map>
#include <vector>

#include "sample/json_schema.h"
#include "server/chat_template.h"

namespace ss {

struct ToolSetup {
  struct Tool {
    std::string name, description;
    nlohmann::json parameters;                 // a JSON schema of the arguments object
    std::shared_ptr<const JsonSchema> schema;  // `parameters` compiled (parse_tools)
  };
  std::vector<Tool> tools;
  bool required = false;  // tool_choice "required" or one named function: no plain answer
  std::string forced;     // tool_choice's named function, if one
  bool parallel = false;  // parallel_tool_calls true: one or more calls an answer
  bool active() const { return !tools.empty(); }
};

inline constexpr int kMaxTools = 64;
inline constexpr int kMaxParallelCalls = 16;

// parallel_tool_calls true (a value that is not a boolean is parse_tools' 400).
bool parallel_tool_calls(const nlohmann::json& body);

// Reads `tools`, `tool_choice` and `parallel_tool_calls` of a chat body into
// `out` (inactive when there are none or tool_choice is "none"); returns an
// error message (a 400) or "".
std::string parse_tools(const nlohmann::json& body, ToolSetup& out);

// The text added to the system message, and the schema the answer follows.
std::string tools_system_text(const ToolSetup& t);
Result<std::shared_ptr<const JsonSchema>> tools_schema(const ToolSetup& t);

// A history message with OpenAI's tool fields as the text the model reads:
// an assistant message's `tool_calls`, a `tool` message's result. Returns an
// error message or "" (`out` then holds the role and text, and the calls
// and result in its tool fields for formats with their own syntax).
// `parallel`: calls are written as the answer's {"tool_calls": [...]} form.
// call_names: the calls' ids met so far and their functions, which name a
// result's function (its `name`, if it has one, comes first).
std::string tool_history_message(const nlohmann::json& m, ChatMessage& out, bool parallel,
                                 std::unordered_map<std::string, std::string>& call_names);

// A fresh id for a call in a reply ("call_" and 24 hex digits).
std::string new_call_id();

// The model's answer (JSON the tools schema accepted, or cut short) as the
// reply's message fields: {"content": null, "tool_calls": [...]} or
// {"content": "..."}; `finish` becomes "tool_calls" for a call. `index`:
// stream deltas number their tool calls.
nlohmann::json tool_reply_fields(const std::string& answer, std::string& finish, bool delta);

}  // namespace ss
