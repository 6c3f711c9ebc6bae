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

}  // namespace
}  // namespace ss
