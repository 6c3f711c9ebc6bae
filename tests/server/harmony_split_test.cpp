#include "server/harmony_split.h"

#include <gtest/gtest.h>

#include <random>

#include "server/api.h"

namespace ss {
namespace {

const std::string kAnswer =
    "<|channel|>analysis<|message|>User says hi. Reply briefly.<|end|>"
    "<|start|>assistant<|channel|>final<|message|>Hello! How can I help?";

HarmonySplit::Parts whole(const std::string& text) { return HarmonySplit().take(text, /*done=*/true); }

TEST(HarmonySplit, ReasoningAndAnswerWithoutMarkers) {
  const auto p = whole(kAnswer);
  EXPECT_EQ(p.reasoning, "User says hi. Reply briefly.");
  EXPECT_EQ(p.content, "Hello! How can I help?");
}

// Cut anywhere (a stop-string hold-back can split a marker): the same parts.
TEST(HarmonySplit, AnyCutsGiveTheSameParts) {
  std::mt19937 rng(3);
  for (int iter = 0; iter < 500; ++iter) {
    HarmonySplit s;
    HarmonySplit::Parts all;
    size_t at = 0;
    while (at < kAnswer.size()) {
      const size_t len = 1 + rng() % 9;
      const auto p = s.push(std::string_view(kAnswer).substr(at, len));
      all.reasoning += p.reasoning;
      all.content += p.content;
      // Nothing of a marker is ever shown.
      EXPECT_EQ(all.content.find("<|"), std::string::npos);
      at += len;
    }
    const auto p = s.finish();
    EXPECT_EQ(all.reasoning + p.reasoning, "User says hi. Reply briefly.");
    EXPECT_EQ(all.content + p.content, "Hello! How can I help?");
  }
}

TEST(HarmonySplit, TextThatIsNotHarmonyIsContent) {
  EXPECT_EQ(whole("Just an answer <with> brackets").content, "Just an answer <with> brackets");
  EXPECT_EQ(whole("Just an answer <with> brackets").reasoning, "");
  // A body keeps a lone '<' that turns out not to be a marker.
  EXPECT_EQ(whole("<|channel|>final<|message|>a < b").content, "a < b");
}

TEST(HarmonySplit, CommentaryIsReasoningAndAnUnfinishedHeaderIsDropped) {
  const auto p = whole(
      "<|channel|>commentary to=functions.f <|constrain|>json<|message|>{\"x\":1}<|call|>"
      "<|start|>assistant<|channel|>fin");
  EXPECT_EQ(p.reasoning, "{\"x\":1}");
  EXPECT_EQ(p.content, "");
}

// What the server sends for a gpt-oss chat: reasoning_content and content
// deltas while streaming, both fields in a non-stream message; other chats
// get the text as content.
TEST(HarmonySplit, ServerChatOutput) {
  const auto m = chat_message(kAnswer, true);
  EXPECT_EQ(m["role"], "assistant");
  EXPECT_EQ(m["content"], "Hello! How can I help?");
  EXPECT_EQ(m["reasoning_content"], "User says hi. Reply briefly.");
  EXPECT_EQ(chat_message(kAnswer, false)["content"], kAnswer);
  EXPECT_FALSE(chat_message(kAnswer, false).contains("reasoning_content"));

  HarmonySplit split;
  std::string reasoning, content;
  const size_t cut = kAnswer.find("final") + 3;  // inside the final header
  for (const auto& part : {kAnswer.substr(0, cut), kAnswer.substr(cut)}) {
    for (const auto& d : chat_deltas(&split, part, part.size() != cut)) {
      if (d.contains("reasoning_content")) reasoning += d["reasoning_content"].get<std::string>();
      if (d.contains("content")) content += d["content"].get<std::string>();
    }
  }
  EXPECT_EQ(reasoning, "User says hi. Reply briefly.");
  EXPECT_EQ(content, "Hello! How can I help?");
  EXPECT_EQ(chat_deltas(nullptr, "abc", false).at(0)["content"], "abc");
  EXPECT_TRUE(chat_deltas(nullptr, "", true).empty());
}

}  // namespace
}  // namespace ss
