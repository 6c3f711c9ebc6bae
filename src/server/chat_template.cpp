#include "server/chat_template.h"

#include <ctime>
#include <nlohmann/json.hpp>

#include "server/json_text.h"

namespace ss {

namespace {

struct NamedFamily {
  const char* name;
  ChatFamily family;
};

// First name of each family is the one printed; the rest are llama.cpp's
// names (--chat-template) for the same format.
constexpr NamedFamily kNames[] = {
    {"plain", ChatFamily::Plain},   {"none", ChatFamily::Plain},        {"llama-2", ChatFamily::Llama2},
    {"llama2", ChatFamily::Llama2}, {"llama2-sys", ChatFamily::Llama2}, {"llama-3", ChatFamily::Llama3},
    {"llama3", ChatFamily::Llama3}, {"chatml", ChatFamily::ChatML},     {"mistral", ChatFamily::Mistral},
    {"zephyr", ChatFamily::Zephyr}, {"gemma", ChatFamily::Gemma},       {"phi3", ChatFamily::Phi3},
    {"gpt-oss", ChatFamily::GptOss}};

std::string trim(const std::string& s) {
  const char* ws = " \t\n\r\f\v";
  const size_t b = s.find_first_not_of(ws);
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(ws) - b + 1);
}

// today (YYYY-MM-DD; empty or unreadable: the current UTC date) in fmt:
// gpt-oss writes "%Y-%m-%d", Llama 3.2's strftime_now "%d %b %Y".
std::string date_text(const std::string& today, const char* fmt) {
  std::tm tm{};
  if (today.empty() || !strptime(today.c_str(), "%Y-%m-%d", &tm)) {
    const std::time_t t = std::time(nullptr);
    gmtime_r(&t, &tm);
  }
  char buf[32];
  std::strftime(buf, sizeof buf, fmt, &tm);
  return buf;
}

// The text between `open` and `close` in the template, if it is a plain
// literal (no quote, brace or +: not built from a variable).
std::string literal_between(const std::string& t, const std::string& open, const std::string& close) {
  for (size_t at = t.find(open); at != std::string::npos; at = t.find(open, at + 1)) {
    const size_t b = at + open.size(), e = t.find(close, b);
    if (e == std::string::npos) return "";
    const std::string s = t.substr(b, e - b);
    if (!s.empty() && s.find_first_of("'\"{}+") == std::string::npos) return s;
  }
  return "";
}

// System messages merged into one (formats with no system role put it in
// front of the first user message).
std::string joined_system(const std::vector<ChatMessage>& msgs, bool trimmed) {
  std::string s;
  for (const auto& m : msgs)
    if (m.role == "system") s += trimmed ? trim(m.content) : m.content;
  return s;
}

}  // namespace

std::optional<ChatFamily> chat_family_from_name(const std::string& n) {
  for (const auto& e : kNames)
    if (n == e.name) return e.family;
  return std::nullopt;
}

const char* chat_family_name(ChatFamily f) {
  for (const auto& e : kNames)
    if (e.family == f) return e.name;
  return "plain";
}

const char* chat_family_names() { return "plain, llama-2, llama-3, chatml, mistral, zephyr, gemma, phi3, gpt-oss"; }

ChatFamily detect_chat_family(const std::string& t) {
  auto has = [&](const char* s) { return t.find(s) != std::string::npos; };
  if (t.empty()) return ChatFamily::Plain;
  if (has("<|im_start|>")) return ChatFamily::ChatML;
  if (t.rfind("mistral", 0) == 0 || has("[INST]")) return has("<<SYS>>") ? ChatFamily::Llama2 : ChatFamily::Mistral;
  if (has("<|assistant|>") && has("<|end|>")) return ChatFamily::Phi3;
  // TinyLlama / Zephyr: <|user|>, turns closed with </s> (llama.cpp's own
  // heuristic calls some of these falcon3 and drops the </s>; the templates
  // themselves write it).
  if (has("<|user|>")) return ChatFamily::Zephyr;
  if (has("<start_of_turn>")) return ChatFamily::Gemma;
  if (has("<|start_header_id|>")) return ChatFamily::Llama3;
  if (has("<|start|>") && has("<|channel|>")) return ChatFamily::GptOss;
  return ChatFamily::Plain;
}

ChatTemplateDefaults chat_template_defaults(const std::string& t) {
  ChatTemplateDefaults d;
  // In the template's source the newline is the two characters \ and n.
  d.default_system = literal_between(t, "<|im_start|>system\\n", "<|im_end|>");
  d.knowledge_date = literal_between(t, "Cutting Knowledge Date: ", "\\n");
  d.llama31_system = !d.knowledge_date.empty() && t.find("<|start_header_id|>") != std::string::npos;
  if (d.llama31_system && t.find("strftime_now") == std::string::npos)
    d.fixed_date = literal_between(t, "set date_string = \"", "\"");
  return d;
}

std::string render_chat_turn(ChatFamily f, const std::vector<ChatMessage>& msgs, bool first_turn,
                             const std::string& today, const ChatTemplateDefaults& defaults,
                             const std::string& harmony_tools) {
  std::string out;
  switch (f) {
    case ChatFamily::Plain:
      for (const auto& m : msgs) {
        if (!out.empty() || !first_turn) out += "\n";
        out += m.content;
      }
      return out;
    case ChatFamily::ChatML:
      if (first_turn && !defaults.default_system.empty() && (msgs.empty() || msgs[0].role != "system"))
        out += "<|im_start|>system\n" + defaults.default_system + "<|im_end|>\n";
      for (const auto& m : msgs) {
        if (out.empty() && !first_turn) out += "\n";
        out.append("<|im_start|>").append(m.role).append("\n").append(m.content).append("<|im_end|>\n");
      }
      return out + "<|im_start|>assistant\n";
    case ChatFamily::Llama3: {
      // llama.cpp trims each message (as Meta's template does).
      if (first_turn) out += "<|begin_of_text|>";
      size_t from = 0;
      if (first_turn && defaults.llama31_system) {
        // 3.1-3.3: a system block always, the first message's text (if it
        // is a system message) after the knowledge and date lines.
        const std::string date = defaults.fixed_date.empty() ? date_text(today, "%d %b %Y") : defaults.fixed_date;
        out += "<|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: " + defaults.knowledge_date +
               "\nToday Date: " + date + "\n\n";
        if (!msgs.empty() && msgs[0].role == "system") out += trim(msgs[from++].content);
        out += "<|eot_id|>";
      }
      for (size_t i = from; i < msgs.size(); ++i)
        out += "<|start_header_id|>" + msgs[i].role + "<|end_header_id|>\n\n" + trim(msgs[i].content) + "<|eot_id|>";
      return out + "<|start_header_id|>assistant<|end_header_id|>\n\n";
    }
    case ChatFamily::Zephyr:
      for (const auto& m : msgs) {
        if (out.empty() && !first_turn) out += "\n";
        out.append("<|").append(m.role).append("|>\n").append(m.content).append("</s>\n");
      }
      return out + "<|assistant|>\n";
    case ChatFamily::Phi3:
      for (const auto& m : msgs) {
        if (out.empty() && !first_turn) out += "\n";
        out.append("<|").append(m.role).append("|>\n").append(m.content).append("<|end|>\n");
      }
      return out + "<|assistant|>\n";
    case ChatFamily::Gemma: {
      // No system role: its text opens the first user message. "assistant"
      // is "model"; messages are trimmed (llama.cpp and Google's template).
      std::string system = joined_system(msgs, /*trimmed=*/true);
      if (!first_turn) out += "\n";
      for (const auto& m : msgs) {
        if (m.role == "system") continue;
        const std::string role = m.role == "assistant" ? "model" : m.role;
        out += "<start_of_turn>" + role + "\n";
        if (!system.empty() && role != "model") {
          out += system + "\n\n";
          system.clear();
        }
        out += trim(m.content) + "<end_of_turn>\n";
      }
      return out + "<start_of_turn>model\n";
    }
    case ChatFamily::GptOss: {
      // OpenAI's Harmony format as gpt-oss's own template writes it: a
      // system message (identity, cutoff, date, reasoning effort, channels),
      // the system prompt as developer instructions and the tools as a
      // TypeScript namespace, then turns; tool calls are commentary
      // messages to functions.NAME, results messages from it.
      if (first_turn) {
        out +=
            "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\n"
            "Knowledge cutoff: 2024-06\nCurrent date: " +
            (today.empty() ? date_text("", "%Y-%m-%d") : today) +
            "\n\nReasoning: medium\n\n# Valid channels: analysis, commentary, final. Channel must be included "
            "for every message.";
        if (!harmony_tools.empty()) out += "\nCalls to these tools must go to the commentary channel: 'functions'.";
        out += "<|end|>";
        const std::string system = joined_system(msgs, /*trimmed=*/false);
        if (!system.empty() || !harmony_tools.empty()) {
          out += "<|start|>developer<|message|>";
          if (!system.empty()) out += "# Instructions\n\n" + system + "\n\n";
          if (!harmony_tools.empty()) out += "# Tools\n\n" + harmony_tools;
          out += "<|end|>";
        }
      }
      for (size_t i = 0; i < msgs.size(); ++i) {
        const ChatMessage& m = msgs[i];
        if (m.role == "system") continue;
        if (!m.calls.empty()) {
          // Its text is the reasoning before the call, kept until a later
          // answer in the final channel (as the template does).
          bool answered_later = false;
          for (size_t k = i + 1; k < msgs.size(); ++k)
            answered_later = answered_later || (msgs[k].role == "assistant" && msgs[k].calls.empty());
          if (!m.said.empty() && !answered_later)
            out += "<|start|>assistant<|channel|>analysis<|message|>" + m.said + "<|end|>";
          for (const ChatMessage::Call& c : m.calls)
            out += "<|start|>assistant to=functions." + c.name + "<|channel|>commentary json<|message|>" + c.arguments +
                   "<|call|>";
        } else if (!m.result_of.empty()) {
          out += "<|start|>functions." + m.result_of + " to=assistant<|channel|>commentary<|message|>" +
                 python_json_text(nlohmann::json(m.result)) + "<|end|>";
        } else if (m.role == "assistant") {
          out += "<|start|>assistant<|channel|>final<|message|>" + m.content + "<|end|>";
        } else {
          out += "<|start|>" + m.role + "<|message|>" + m.content + "<|end|>";
        }
      }
      return out + "<|start|>assistant";
    }
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
