#pragma once
// gpt-oss's own tool calls (OpenAI's Harmony format), where the generic JSON
// form of tool_calls.h would fight the model's training:
//  - the tools are described in the developer message as a TypeScript
//    namespace, as gpt-oss's chat template renders them
//    (harmony_tools_namespace);
//  - the model calls one with a commentary message addressed to it,
//      <|channel|>commentary to=functions.NAME <|constrain|>json<|message|>{args}<|call|>
//    (or `to=functions.NAME` right after <|start|>assistant, before the
//    channel), after an optional analysis message; the answer is shaped
//    so (harmony_tool_plan: the header as a lead, then NAME's argument
//    schema), and under tool_choice "auto" it may instead answer in the
//    final channel, as free text;
//  - the reply turns the call into OpenAI's tool_calls
//    (harmony_tool_reply_fields).
// One call per answer (Harmony writes one call per message); history is
// written by the chat template (chat_template.cpp).
#include <nlohmann/json.hpp>
#include <string>

#include "sample/constraint.h"
#include "server/tool_calls.h"
#include "util/result.h"

namespace ss {

// "## functions\n\nnamespace functions {\n\n// ...\ntype NAME = (_: {...}) => any;\n\n} // namespace functions"
std::string harmony_tools_namespace(const ToolSetup& t);
// A JSON schema as the template's TypeScript type ("string", "\"a\" | \"b\"",
// "number[]", "{\n...}", "any", ...).
std::string harmony_typescript_type(const nlohmann::json& schema);

// The answer's shape: reasoning, a call header (or the final channel under
// "auto"), then the called tool's arguments.
Result<ShapePlan> harmony_tool_plan(const ToolSetup& t);

// The answer (Harmony text) as the reply's message fields: reasoning_content
// and either {"content": null, "tool_calls": [one call]} (finish "stop"
// becomes "tool_calls") or {"content": final text}.
nlohmann::json harmony_tool_reply_fields(const std::string& answer, std::string& finish, bool delta);

}  // namespace ss
