#include "sample/json_grammar.h"

#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <regex>

namespace ss {
namespace {

using nlohmann::json;

// A whole text: every prefix feeds, and only the whole is complete.
bool accepts(const std::string& text) {
  JsonGrammar g;
  for (size_t i = 0; i < text.size(); ++i) {
    if (!g.feed(std::string_view(text).substr(i, 1))) return false;
    if (g.complete() && text.find_first_not_of(" \t\r\n", i + 1) != std::string::npos) return false;
  }
  return g.complete();
}

// Every run of whitespace outside strings is llama.cpp's `space`.
bool whitespace_ok(const std::string& text) {
  static const std::regex run("( |\n{1,2}[ \t]{0,20})?");
  bool in_string = false, escaped = false;
  std::string ws;
  for (char c : text) {
    if (in_string) {
      in_string = escaped || c != '"';
      escaped = !escaped && c == '\\';
      continue;
    }
    if (c == ' ' || c == '\n' || c == '\t' || c == '\r') {
      ws += c;
      continue;
    }
    if (!std::regex_match(ws, run)) return false;
    ws.clear();
    in_string = c == '"';
  }
  return std::regex_match(ws, run);
}

// The oracle: nlohmann's parser, for a top-level object within our depth,
// and the whitespace rule. nullopt: a number the grammar allows but a
// double cannot hold (1e999), which the parser rejects for range, not syntax.
std::optional<bool> oracle(const std::string& text) {
  try {
    return json::parse(text).is_object() && whitespace_ok(text);
  } catch (const json::out_of_range&) {
    return std::nullopt;
  } catch (const json::exception&) {
    return false;
  }
}

json random_value(std::mt19937& rng, int depth) {
  std::uniform_int_distribution<int> kind(0, depth >= 6 ? 4 : 6);
  switch (kind(rng)) {
    case 0:
      return nullptr;
    case 1:
      return rng() % 2 == 0;
    case 2:
      return static_cast<int64_t>(rng() % 20000) - 10000;
    case 3:
      return std::ldexp(static_cast<double>(rng() % 100000) - 50000, static_cast<int>(rng() % 40) - 20);
    case 4: {
      std::string s;  // dump escapes quotes, backslashes and control characters
      const char* pieces[] = {"a", "b", " ", "\"", "\\", "/", "\n", "\t", "\x01",     "\x1f",        "{",
                              "}", "[", "]", ",",  ":",  "-", "0",  "e",  "\xc3\xa9", "\xe2\x82\xac"};
      for (size_t n = rng() % 8; n > 0; --n) s += pieces[rng() % std::size(pieces)];
      return s;
    }
    case 5: {
      json a = json::array();
      for (size_t n = rng() % 4; n > 0; --n) a.push_back(random_value(rng, depth + 1));
      return a;
    }
    default: {
      json o = json::object();
      for (size_t n = rng() % 4; n > 0; --n) o["k" + std::to_string(rng() % 10)] = random_value(rng, depth + 1);
      return o;
    }
  }
}

std::string with_random_space(const std::string& text, std::mt19937& rng) {
  // Whitespace is legal between tokens; inserting it only outside strings
  // keeps the text valid, which dump's own indentation does for us.
  return rng() % 2 == 0 ? text : json::parse(text).dump(static_cast<int>(rng() % 3));
}

TEST(JsonGrammar, AcceptsWhatNlohmannParsesAsAnObject) {
  std::mt19937 rng(11);
  for (int i = 0; i < 2000; ++i) {
    json o = json::object();
    for (size_t n = rng() % 5; n > 0; --n) o["key" + std::to_string(i % 7) + std::to_string(n)] = random_value(rng, 1);
    const std::string text = with_random_space(o.dump(), rng);
    ASSERT_TRUE(accepts(text)) << text;
    ASSERT_TRUE(accepts("\n " + text + "\n\t")) << text;
  }
}

// Every one-byte mutation of valid texts (UTF-8 ones included: strings
// hold valid UTF-8, as the parser demands) is judged as the parser judges it.
TEST(JsonGrammar, AgreesWithNlohmannOnMutatedTexts) {
  std::mt19937 rng(12);
  const std::string bytes = "{}[],:\"\\ 0123456789-+.eEtrufalsn\x01\tx\x80\xa0\xbf\xc3\xc0\xe0\xe2\xed\xf0\xf4\xff";
  int rejected = 0;
  for (int i = 0; i < 4000; ++i) {
    json o = json::object();
    for (size_t n = 1 + rng() % 3; n > 0; --n) o["k" + std::to_string(n)] = random_value(rng, 1);
    std::string text = o.dump();
    const size_t at = rng() % text.size();
    switch (rng() % 3) {
      case 0:
        text[at] = bytes[rng() % bytes.size()];
        break;
      case 1:
        text.insert(at, 1, bytes[rng() % bytes.size()]);
        break;
      default:
        text.erase(at, 1);
    }
    const std::optional<bool> want = oracle(text);
    if (!want) continue;
    ASSERT_EQ(accepts(text), *want) << text;
    rejected += !*want;
  }
  EXPECT_GT(rejected, 1000);  // the mutations did break many texts
}

TEST(JsonGrammar, TopLevelMustBeAnObjectAndDepthIsBounded) {
  for (const char* bad : {"[]", "1", "\"s\"", "null", "{} {}", "{\"a\":1,}", "{\"a\" 1}", "{'a':1}", "{\"a\":01}",
                          "{\"a\":1.}", "{\"a\":-}", "{\"a\":tru}", "{\"a\":\"\\x\"}", "{\"a\":\"\\u12g4\"}"})
    EXPECT_FALSE(accepts(bad)) << bad;
  std::string deep = "{\"a\":";
  for (int i = 1; i < JsonGrammar::kMaxDepth; ++i) deep += "[";
  JsonGrammar g;
  EXPECT_TRUE(g.feed(deep));
  EXPECT_FALSE(g.feed("["));  // one more level
  EXPECT_TRUE(g.feed("1"));
  EXPECT_FALSE(g.complete());
}

TEST(JsonGrammar, WhitespaceRunsAreLlamaCppsSpaceRule) {
  const std::string indent(JsonGrammar::kMaxWhitespace, ' ');
  JsonGrammar g;
  EXPECT_TRUE(g.feed("\n\n" + indent + "{ \"a  b\"\n\t:\n" + indent + "1\n}\n"));
  EXPECT_TRUE(g.complete());
  for (const char* bad : {"{  \"a\":1}", "{\t\"a\":1}", "{ \n\"a\":1}", "{\n\n\n\"a\":1}", "{\"a\":1\r\n}"}) {
    JsonGrammar h;
    EXPECT_FALSE(h.feed(bad)) << bad;
  }
  JsonGrammar h;
  EXPECT_TRUE(h.feed("{\"a\":\n" + indent));
  EXPECT_FALSE(h.feed(" "));  // one past the indentation
  EXPECT_TRUE(h.feed("2}"));
}

TEST(JsonGrammar, MaskAllowsExactlyTheTokensThatContinue) {
  const std::vector<std::string> tokens = {"", "{", " {", "{\"", "}", "\"a\"", ":", "1", "}}", "x", " "};
  std::vector<float> logits(tokens.size() + 2, 0.0f);  // two ids past the table: masked too
  JsonGrammar g;
  EXPECT_EQ(g.mask(tokens, logits), 4u);  // "{", " {", "{\"", " "
  for (size_t id = 0; id < logits.size(); ++id) {
    const bool want = id == 1 || id == 2 || id == 3 || id == 10;
    EXPECT_EQ(std::isinf(logits[id]), !want) << id;
  }
  ASSERT_TRUE(g.feed("{\"a\":1"));
  std::vector<float> after(tokens.size(), 0.0f);
  g.mask(tokens, after);
  EXPECT_FALSE(std::isinf(after[4]));  // "}" closes
  EXPECT_TRUE(std::isinf(after[8]));   // "}}" closes one too many
  EXPECT_FALSE(std::isinf(after[7]));  // "1" extends the number
  ASSERT_TRUE(g.feed("}"));
  EXPECT_TRUE(g.complete());
}

}  // namespace
}  // namespace ss
