#pragma once
// Chat prompt formats. The family is detected from GGUF
// tokenizer.chat_template (or forced by name) in llama.cpp's order of checks;
// base models without a template get plain concatenation. Rendering is per
// turn so a session prefills only its new messages; the first turn carries
// the template head and system prompt, which therefore become the session's
// attention sinks.
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace ss {

enum class ChatFamily { Plain, Llama2, Llama3, ChatML, Mistral, Zephyr, Gemma, Phi3, GptOss };

struct ChatMessage {
  ChatMessage() = default;
  ChatMessage(std::string r, std::string c) : role(std::move(r)), content(std::move(c)) {}

  std::string role;  // system | user | assistant
  std::string content;
  // Tool fields, for formats that write them their own way (gpt-oss); the
  // generic form (tool_calls.h) has already put them into role and content.
  struct Call {
    std::string name, arguments;  // arguments: JSON text as templates' tojson writes it (json_text.h)
  };
  std::vector<Call> calls;  // an assistant message's tool calls
  std::string said;         // that message's own text, without the calls
  std::string result_of;    // a tool result: the function it answers ("" if unknown)
  std::string result;       // its content as sent
};

std::optional<ChatFamily> chat_family_from_name(const std::string& name);
const char* chat_family_name(ChatFamily f);
// The names chat_family_from_name accepts, for help and error texts.
const char* chat_family_names();
ChatFamily detect_chat_family(const std::string& jinja_template);

// What a template adds on its own, read from its text, so a family renders
// as the model's Jinja template does (Hugging Face's apply_chat_template,
// vLLM, llama.cpp's server with its default --jinja):
//  - ChatML templates that open with a default system message when the
//    conversation has none (Qwen2 / Qwen2.5: "You are Qwen, created by
//    Alibaba Cloud. You are a helpful assistant.");
//  - Llama 3.1-3.3 templates, whose system block is always there and starts
//    with "Cutting Knowledge Date: ..." and "Today Date: ..." (the date the
//    template sets, or today's where it calls strftime_now, as 3.2's does).
struct ChatTemplateDefaults {
  std::string default_system;  // ChatML
  bool llama31_system = false;
  std::string knowledge_date;  // "December 2023"
  std::string fixed_date;      // "26 Jul 2024"; empty: today as "%d %b %Y"
};
ChatTemplateDefaults chat_template_defaults(const std::string& jinja_template);

// The rendered text already starts with the BOS token (Llama 3's
// <|begin_of_text|>): the tokenizer must not add another.
inline bool chat_text_has_bos(ChatFamily f) { return f == ChatFamily::Llama3; }

// Text for `messages` (the new part of a conversation) followed by the
// assistant prompt. first_turn: the conversation starts here (template head).
// A later turn follows the end-of-turn token the model wrote (the caller
// feeds it first), so it starts with what the format puts after that token.
// today (YYYY-MM-DD): gpt-oss's system message states the date; empty means
// the current UTC date.
// defaults: what the model's own template adds (chat_template_defaults).
// harmony_tools: gpt-oss's tools as a TypeScript namespace
// (harmony_tools_namespace), written in its developer message; other
// families get their tools in the system text.
std::string render_chat_turn(ChatFamily f, const std::vector<ChatMessage>& messages, bool first_turn,
                             const std::string& today = "", const ChatTemplateDefaults& defaults = {},
                             const std::string& harmony_tools = "");

}  // namespace ss
