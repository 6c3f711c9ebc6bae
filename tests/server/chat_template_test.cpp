#include "server/chat_template.h"

#include <gtest/gtest.h>

namespace ss {
namespace {

TEST(ChatTemplate, DetectsFamiliesFromGgufTemplates) {
  EXPECT_EQ(detect_chat_family("{% for m in messages %}<|im_start|>{{m.role}}"), ChatFamily::ChatML);
  EXPECT_EQ(detect_chat_family("<|start_header_id|>{{ role }}<|end_header_id|>"), ChatFamily::Llama3);
  EXPECT_EQ(detect_chat_family("[INST] <<SYS>>\\n{{ system }}"), ChatFamily::Llama2);
  EXPECT_EQ(detect_chat_family("{{ bos_token }}[INST] {{ message }} [/INST]"), ChatFamily::Mistral);
  EXPECT_EQ(detect_chat_family("<|user|>\\n{{ message }}</s>"), ChatFamily::Zephyr);
  EXPECT_EQ(detect_chat_family(""), ChatFamily::Plain);
  EXPECT_EQ(detect_chat_family("{{ '<start_of_turn>' + role + '\\n' }}"), ChatFamily::Gemma);
  EXPECT_EQ(detect_chat_family("<|user|>\\n{{ m }}<|end|>\\n<|assistant|>\\n"), ChatFamily::Phi3);
  EXPECT_EQ(detect_chat_family("{{- '<|start|>assistant<|channel|>final<|message|>' }}"), ChatFamily::GptOss);
  // llama.cpp's order: ChatML is checked before anything else.
  EXPECT_EQ(detect_chat_family("<|im_start|> <|start_header_id|>"), ChatFamily::ChatML);
  for (const char* n : {"gemma", "phi3", "gpt-oss", "llama3", "llama2", "none"})
    EXPECT_TRUE(chat_family_from_name(n).has_value()) << n;
  EXPECT_EQ(*chat_family_from_name("chatml"), ChatFamily::ChatML);
  EXPECT_FALSE(chat_family_from_name("nope").has_value());
}

TEST(ChatTemplate, FirstTurnCarriesTheHeadAndSystemPrompt) {
  const std::vector<ChatMessage> m = {{"system", "Be brief."}, {"user", "Hi"}};
  EXPECT_EQ(render_chat_turn(ChatFamily::ChatML, m, true),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(render_chat_turn(ChatFamily::Llama3, m, true),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe "
            "brief.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi"
            "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
  EXPECT_EQ(render_chat_turn(ChatFamily::Llama2, m, true), "[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nHi [/INST]");
  EXPECT_EQ(render_chat_turn(ChatFamily::Zephyr, m, true),
            "<|system|>\nBe brief.</s>\n<|user|>\nHi</s>\n<|assistant|>\n");
  // A later turn renders only its new messages (no head).
  EXPECT_EQ(
      render_chat_turn(ChatFamily::Llama3, {{"user", "More"}}, false),
      "<|start_header_id|>user<|end_header_id|>\n\nMore<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
  EXPECT_EQ(render_chat_turn(ChatFamily::Plain, {{"user", "More"}}, false), "\nMore");
}

// Expected texts: llama.cpp b8183's llama_chat_apply_template for gemma and
// phi3; gpt-oss's own Jinja template (rendered with Jinja2, no tools).
TEST(ChatTemplate, GemmaPutsTheSystemPromptIntoTheFirstUserTurn) {
  const std::vector<ChatMessage> m = {{"system", "  Be brief. "}, {"user", " Hi "}};
  EXPECT_EQ(render_chat_turn(ChatFamily::Gemma, m, true),
            "<start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\n");
  EXPECT_EQ(render_chat_turn(ChatFamily::Gemma, {{"user", "More"}}, false),
            "\n<start_of_turn>user\nMore<end_of_turn>\n<start_of_turn>model\n");
}

TEST(ChatTemplate, Phi3) {
  const std::vector<ChatMessage> m = {{"system", "Be brief."}, {"user", "Hi"}};
  EXPECT_EQ(render_chat_turn(ChatFamily::Phi3, m, true),
            "<|system|>\nBe brief.<|end|>\n<|user|>\nHi<|end|>\n<|assistant|>\n");
  EXPECT_EQ(render_chat_turn(ChatFamily::Phi3, {{"user", "More"}}, false), "\n<|user|>\nMore<|end|>\n<|assistant|>\n");
}

TEST(ChatTemplate, GptOssWritesHarmonysSystemAndDeveloperMessages) {
  const std::vector<ChatMessage> m = {{"system", "Be brief."}, {"user", "Hi"}};
  EXPECT_EQ(render_chat_turn(ChatFamily::GptOss, m, true, "2026-12-07"),
            "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\n"
            "Knowledge cutoff: 2024-06\nCurrent date: 2026-12-07\n\nReasoning: medium\n\n"
            "# Valid channels: analysis, commentary, final. Channel must be included for every message.<|end|>"
            "<|start|>developer<|message|># Instructions\n\nBe brief.\n\n<|end|>"
            "<|start|>user<|message|>Hi<|end|><|start|>assistant");
  EXPECT_EQ(render_chat_turn(ChatFamily::GptOss, {{"user", "More"}}, false, "2026-12-07"),
            "<|start|>user<|message|>More<|end|><|start|>assistant");
  // Without a date the current one is written (YYYY-MM-DD).
  const std::string now = render_chat_turn(ChatFamily::GptOss, {{"user", "x"}}, true);
  const auto at = now.find("Current date: ");
  ASSERT_NE(at, std::string::npos);
  EXPECT_EQ(now.substr(at + 14 + 4, 1), "-");
  EXPECT_EQ(now.substr(at + 14 + 10, 2), "\n\n");
}

// The lines of the models' own templates that add text by themselves (as
// they appear in the Jinja source, where a newline is backslash-n).
const std::string kQwen25 =
    "{%- else %}\n    {%- if messages[0]['role'] == 'system' %}\n"
    "        {{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}\n    {%- else %}\n"
    "        {{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful "
    "assistant.<|im_end|>\\n' }}\n";
const std::string kQwen3 = "{{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}";
const std::string kLlama31 =
    "{%- if not date_string is defined %}\n    {%- set date_string = \"26 Jul 2024\" %}\n{%- endif %}\n"
    "{{- \"<|start_header_id|>system<|end_header_id|>\\n\\n\" }}\n"
    "{{- \"Cutting Knowledge Date: December 2023\\n\" }}\n{{- \"Today Date: \" + date_string + \"\\n\\n\" }}";
const std::string kLlama32 =
    "{%- if not date_string is defined %}\n    {%- if strftime_now is defined %}\n"
    "        {%- set date_string = strftime_now(\"%d %b %Y\") %}\n    {%- else %}\n"
    "        {%- set date_string = \"26 Jul 2024\" %}\n    {%- endif %}\n{%- endif %}\n"
    "{{- \"<|start_header_id|>system<|end_header_id|>\\n\\n\" }}\n"
    "{{- \"Cutting Knowledge Date: December 2023\\n\" }}\n{{- \"Today Date: \" + date_string + \"\\n\\n\" }}";

// What the templates themselves render (Jinja2 on the models' own
// templates gave the same for Llama 3.1 / 3.2 / 3.3, Qwen2.5 and Qwen3:
// 37 of 37 conversations, outside the repo).
TEST(ChatTemplate, QwenDefaultSystemMessageComesFromTheTemplate) {
  const ChatTemplateDefaults q = chat_template_defaults(kQwen25);
  EXPECT_EQ(q.default_system, "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.");
  EXPECT_EQ(render_chat_turn(ChatFamily::ChatML, {{"user", "Hi"}}, true, "", q),
            "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  // A system message of the conversation's own replaces it; later turns never repeat it.
  EXPECT_EQ(render_chat_turn(ChatFamily::ChatML, {{"system", "S"}, {"user", "Hi"}}, true, "", q),
            "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(render_chat_turn(ChatFamily::ChatML, {{"user", "More"}}, false, "", q),
            "\n<|im_start|>user\nMore<|im_end|>\n<|im_start|>assistant\n");
  // Qwen3's system line is built from the message: no default.
  EXPECT_EQ(chat_template_defaults(kQwen3).default_system, "");
  EXPECT_FALSE(chat_template_defaults(kQwen25).llama31_system);
}

TEST(ChatTemplate, Llama31SystemBlockHasKnowledgeAndDateLines) {
  const ChatTemplateDefaults d31 = chat_template_defaults(kLlama31);
  ASSERT_TRUE(d31.llama31_system);
  EXPECT_EQ(d31.knowledge_date, "December 2023");
  EXPECT_EQ(d31.fixed_date, "26 Jul 2024");
  EXPECT_EQ(render_chat_turn(ChatFamily::Llama3, {{"user", "Hi"}}, true, "2026-12-07", d31),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\n"
            "Today Date: 26 Jul 2024\n\n<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  // 3.2 asks strftime_now for today's date; the system text follows the two lines, trimmed.
  const ChatTemplateDefaults d32 = chat_template_defaults(kLlama32);
  EXPECT_EQ(d32.fixed_date, "");
  EXPECT_EQ(render_chat_turn(ChatFamily::Llama3, {{"system", " Be brief. "}, {"user", "Hi"}}, true, "2026-12-07", d32),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\n"
            "Today Date: 07 Dec 2026\n\nBe brief.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  EXPECT_EQ(
      render_chat_turn(ChatFamily::Llama3, {{"user", "More"}}, false, "2026-12-07", d32),
      "<|start_header_id|>user<|end_header_id|>\n\nMore<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
  // Llama 3.0's template has neither line: unchanged.
  EXPECT_FALSE(chat_template_defaults("{{ '<|start_header_id|>' + message['role'] }}").llama31_system);
}

}  // namespace
}  // namespace ss
