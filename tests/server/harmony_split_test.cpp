#include "server/harmony_split.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "sample/constraint.h"
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

// Structured output on gpt-oss: the lead (reasoning, then the final
// channel's header) is written whole, then the schema holds the final text.
TEST(HarmonyLead, ReasoningThenTheFinalHeaderThenTheShape) {
  const auto lead = harmony_final_lead();
  auto takes = [&](const std::string& text) {
    GbnfMatcher m(lead);
    return m.feed(text) && m.complete();
  };
  EXPECT_TRUE(takes("<|channel|>final<|message|>"));
  EXPECT_TRUE(takes("<|channel|>final <|constrain|>json<|message|>"));
  EXPECT_TRUE(
      takes("<|channel|>analysis<|message|>Think: a < b, x|y.<|end|><|start|>assistant<|channel|>final<|message|>"));
  EXPECT_FALSE(takes("<|channel|>analysis<|message|>done<|end|><|channel|>final<|message|>"));  // no <|start|>assistant
  EXPECT_FALSE(takes("<|channel|>commentary<|message|>"));
  EXPECT_FALSE(takes("final<|message|>"));
  GbnfMatcher m(lead);
  ASSERT_TRUE(m.feed("<|channel|>analysis<|message|>a<|end|>"));  // the reasoning closed at its first <|end|>
  EXPECT_FALSE(m.feed("more"));

  // Through a Constraint over a vocabulary of Harmony tokens and text.
  const std::vector<std::string> bytes = {"",          "<|channel|>", "analysis", "<|message|>", "<|end|>",
                                          "<|start|>", "assistant",   "final",    "{",           "}",
                                          "\"a\"",     ":",           "1",        "x",           "<",
                                          "|",         "end",         ">",        "<|message|>{"};
  const ConstraintVocab vocab(bytes, {0});
  auto schema = JsonSchema::compile(
      nlohmann::json::parse(R"({"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]})"));
  ASSERT_TRUE(schema.ok());
  auto id = [&](const std::string& t) {
    return static_cast<int32_t>(std::find(bytes.begin(), bytes.end(), t) - bytes.begin());
  };
  std::mt19937 rng(3);
  int finished = 0, walked = 0;
  for (int walk = 0; walk < 40; ++walk) {
    Constraint c(harmony_final_plan(*schema, nullptr));
    std::vector<int32_t> fed;
    for (int step = 0; step < 40 && !c.complete(); ++step) {
      std::vector<float> logits(bytes.size(), 0.0f);
      const size_t allowed = c.mask(vocab, logits, true);
      std::vector<int32_t> ok;
      for (size_t t = 0; t < bytes.size(); ++t) {
        bool want = false;
        if (t == 0) {
          want = c.can_end();
        } else {
          Constraint fresh(harmony_final_plan(*schema, nullptr));
          bool replay = true;
          for (const int32_t f : fed) replay = replay && fresh.feed_token(f, bytes[static_cast<size_t>(f)]);
          want = replay && fresh.feed_token(static_cast<int32_t>(t), bytes[t]);
        }
        EXPECT_EQ(!std::isinf(logits[t]), want) << "token '" << bytes[t] << "' after " << fed.size();
        if (want && t != 0) ok.push_back(static_cast<int32_t>(t));
      }
      EXPECT_EQ(allowed, ok.size() + (c.can_end() ? 1 : 0));
      ++walked;
      if (ok.empty()) break;
      // Mostly toward the end of the reasoning, so walks get to the answer.
      int32_t pick = ok[std::uniform_int_distribution<size_t>(0, ok.size() - 1)(rng)];
      for (const int32_t t : ok)
        if (bytes[static_cast<size_t>(t)].rfind("<|", 0) == 0 && rng() % 2) pick = t;
      ASSERT_TRUE(c.feed_token(pick, bytes[static_cast<size_t>(pick)]));
      fed.push_back(pick);
    }
    finished += c.complete();
  }
  std::printf("%d of 40 walks finished the answer, %d steps\n", finished, walked);
  EXPECT_GT(finished, 10);
  EXPECT_GT(walked, 300);
  // A token that runs past the lead into the shape is refused: the shape
  // starts at a token boundary.
  Constraint c(harmony_final_plan(*schema, nullptr));
  ASSERT_TRUE(c.feed_token(id("<|channel|>"), "<|channel|>"));
  ASSERT_TRUE(c.feed_token(id("final"), "final"));
  EXPECT_FALSE(c.feed_token(id("<|message|>{"), "<|message|>{"));
  EXPECT_TRUE(c.in_lead());
  EXPECT_FALSE(c.can_end());
  ASSERT_TRUE(c.feed_token(id("<|message|>"), "<|message|>"));
  EXPECT_FALSE(c.in_lead());
  for (const char* t : {"{", "\"a\"", ":", "1", "}"}) ASSERT_TRUE(c.feed_token(id(t), t)) << t;
  EXPECT_TRUE(c.complete());
}

// In the reasoning, the pick from the unmasked logits is checked first and
// kept if it feeds: for temperature sampling the distribution is the masked
// one (a refused pick is masked and drawn again).
TEST(HarmonyLead, ReasoningPicksAreCheckedBeforeMaskingWithTheSameDistribution) {
  const std::vector<std::string> bytes = {"",  "<|channel|>", "analysis", "<|message|>",
                                          "x", "<|end|>y",    "<|end|>",  "<|end|><|start|>"};
  const ConstraintVocab vocab(bytes, {0});
  auto schema = JsonSchema::any_object();
  auto in_reasoning = [&] {
    auto c = std::make_unique<Constraint>(harmony_final_plan(schema, nullptr));
    for (const char* t : {"<|channel|>", "analysis", "<|message|>"})
      EXPECT_TRUE(c->feed_token(static_cast<int32_t>(std::find(bytes.begin(), bytes.end(), t) - bytes.begin()), t));
    return c;
  };
  // Reasoning may go on with any text that does not hold <|end|> and close
  // with it; the end of generation and "<|end|>y" are refused there. The
  // logits favour the refused ones.
  const std::vector<float> logits = {3.0f, 1.0f, 0.5f, 0.2f, 0.0f, 2.5f, -1.0f, 0.4f};
  SamplingParams sp;
  sp.temperature = 1.0f;
  sp.top_k = 0;
  sp.top_p = 1.0f;
  sp.min_p = 0.0f;
  std::vector<int> checked_first(bytes.size(), 0), masked_only(bytes.size(), 0);
  const int kDraws = 20000;
  std::vector<float> scratch;
  for (int round = 0; round < 2; ++round) {
    sp.seed = 77 + round;
    Sampler sampler(sp);
    for (int i = 0; i < kDraws; ++i) {
      auto c = in_reasoning();
      auto sample = [&](std::span<const float> l) { return sampler.sample(l, {}); };
      auto is_end = [](int32_t t) { return t == 0; };
      int32_t tok = -1;
      if (round == 0) {
        tok = sample_shaped(*c, vocab, logits, scratch, true, sample, is_end);
      } else {  // the reference: always masked first
        scratch.assign(logits.begin(), logits.end());
        const size_t allowed = c->mask(vocab, scratch, true);
        tok = sample_and_feed(*c, vocab, scratch, allowed, sample, is_end);
      }
      ASSERT_GE(tok, 0);
      ++(round == 0 ? checked_first : masked_only)[static_cast<size_t>(tok)];
    }
  }
  for (size_t t = 0; t < bytes.size(); ++t) {
    const bool may = t != 0 && bytes[t] != "<|end|>y";
    if (!may) {
      EXPECT_EQ(checked_first[t], 0) << bytes[t];
      EXPECT_EQ(masked_only[t], 0) << bytes[t];
      continue;
    }
    // Two independent samples of one multinomial: within 5 standard deviations.
    const double p = static_cast<double>(masked_only[t]) / kDraws;
    const double sd = std::sqrt(2.0 * kDraws * p * (1 - p));
    EXPECT_NEAR(checked_first[t], masked_only[t], 5 * sd + 1) << bytes[t];
    EXPECT_GT(masked_only[t], kDraws / 50) << bytes[t];
  }
}

}  // namespace
}  // namespace ss
