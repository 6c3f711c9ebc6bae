#pragma once
// Chat prompt formats. The family is detected from GGUF
// tokenizer.chat_template (or forced by name); base models without a template
// get plain concatenation. Rendering is per turn so a session prefills only
// its new messages; the first turn carries the template head and system
// prompt, which therefore become the session's attention sinks.
#include <optional>
#include <string>
#include <vector>

namespace ss {

enum class ChatFamily { Plain, Llama2, Llama3, ChatML, Mistral, Zephyr };

struct ChatMessage {
  std::string role;  // system | user | assistant
  std::string content;
};

std::optional<ChatFamily> chat_family_from_name(const std::string& name);
const char* chat_family_name(ChatFamily f);
ChatFamily detect_chat_family(const std::string& jinja_template);

// Text for `messages` (the new part of a conversation) followed by the
// assistant prompt. first_turn: the conversation starts here (template head).
std::string render_chat_turn(ChatFamily f, const std::vector<ChatMessage>& messages, bool first_turn);

}  // namespace ss
