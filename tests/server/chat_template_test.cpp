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

}  // namespace
}  // namespace ss
