#pragma once
// Chat prompt formats. The family is detected from GGUF
// tokenizer.chat_template (or forced by name) in llama.cpp's order of checks;
// base models without a template get plain concatenation. Rendering is per
// turn so a session prefills only its new messages; the first turn carries
// the template head and system prompt, which therefore become the session's
// attention sinks.
#include <optional>
#include <string>
#include <vector>

namespace ss {

enum class ChatFamily { Plain, Llama2, Llama3, ChatML, Mistral, Zephyr, Gemma, Phi3, GptOss };

struct ChatMessage {
  std::string role;  // system | user | assistant
  std::string content;
};

std::optional<ChatFamily> chat_family_from_name(const std::string& name);
const char* chat_family_name(ChatFamily f);
// The names chat_family_from_name accepts, for help and error texts.
const char* chat_family_names();
ChatFamily detect_chat_family(const std::string& jinja_template);

// Text for `messages` (the new part of a conversation) followed by the
// assistant prompt. first_turn: the conversation starts here (template head).
// A later turn follows the end-of-turn token the model wrote (the caller
// feeds it first), so it starts with what the format puts after that token.
// today (YYYY-MM-DD): gpt-oss's system message states the date; empty means
// the current UTC date.
std::string render_chat_turn(ChatFamily f, const std::vector<ChatMessage>& messages, bool first_turn,
                             const std::string& today = "");

}  // namespace ss
