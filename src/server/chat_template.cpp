#include "server/chat_template.h"

namespace ss {

std::optional<ChatFamily> chat_family_from_name(const std::string& n) {
  if (n == "plain" || n == "none") return ChatFamily::Plain;
  if (n == "llama-2" || n == "llama2") return ChatFamily::Llama2;
  if (n == "llama-3" || n == "llama3") return ChatFamily::Llama3;
  if (n == "chatml") return ChatFamily::ChatML;
  if (n == "mistral") return ChatFamily::Mistral;
  if (n == "zephyr") return ChatFamily::Zephyr;
  return std::nullopt;
}

const char* chat_family_name(ChatFamily f) {
  switch (f) {
    case ChatFamily::Plain:
      return "plain";
    case ChatFamily::Llama2:
      return "llama-2";
    case ChatFamily::Llama3:
      return "llama-3";
    case ChatFamily::ChatML:
      return "chatml";
    case ChatFamily::Mistral:
      return "mistral";
    case ChatFamily::Zephyr:
      return "zephyr";
  }
  return "plain";
}

ChatFamily detect_chat_family(const std::string& t) {
  if (t.empty()) return ChatFamily::Plain;
  if (t.find("<|start_header_id|>") != std::string::npos) return ChatFamily::Llama3;
  if (t.find("<|im_start|>") != std::string::npos) return ChatFamily::ChatML;
  if (t.find("<|user|>") != std::string::npos) return ChatFamily::Zephyr;
  if (t.find("<<SYS>>") != std::string::npos) return ChatFamily::Llama2;
  if (t.find("[INST]") != std::string::npos) return ChatFamily::Mistral;
  return ChatFamily::Plain;
}

std::string render_chat_turn(ChatFamily f, const std::vector<ChatMessage>& msgs, bool first_turn) {
  std::string out;
  switch (f) {
    case ChatFamily::Plain:
      for (const auto& m : msgs) {
        if (!out.empty() || !first_turn) out += "\n";
        out += m.content;
      }
      return out;
    case ChatFamily::ChatML:
      for (const auto& m : msgs) {
        if (out.empty() && !first_turn) out += "\n";
        out.append("<|im_start|>").append(m.role).append("\n").append(m.content).append("<|im_end|>\n");
      }
      return out + "<|im_start|>assistant\n";
    case ChatFamily::Llama3:
      if (first_turn) out += "<|begin_of_text|>";
      for (const auto& m : msgs)
        out += "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n" + m.content + "<|eot_id|>";
      return out + "<|start_header_id|>assistant<|end_header_id|>\n\n";
    case ChatFamily::Zephyr:
      for (const auto& m : msgs) {
        if (out.empty() && !first_turn) out += "\n";
        out.append("<|").append(m.role).append("|>\n").append(m.content).append("</s>\n");
      }
      return out + "<|assistant|>\n";
    case ChatFamily::Llama2:
    case ChatFamily::Mistral: {
      std::string system;
      for (const auto& m : msgs) {
        if (m.role == "system") {
          system += m.content;
          continue;
        }
        if (m.role == "user") {
          std::string content = m.content;
          if (!system.empty()) {
            content =
                f == ChatFamily::Llama2 ? "<<SYS>>\n" + system + "\n<</SYS>>\n\n" + content : system + "\n\n" + content;
            system.clear();
          }
          out += "[INST] " + content + " [/INST]";
        } else {
          out += " " + m.content + "</s>";
        }
      }
      return out;
    }
  }
  return out;
}

}  // namespace ss
