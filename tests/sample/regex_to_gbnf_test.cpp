// Regular expressions as GBNF (regex_to_gbnf.h), checked against the
// standard library's ECMAScript engine (std::regex_match: whole texts) on
// random patterns and texts, and its refusals.
#include "sample/regex_to_gbnf.h"

#include <gtest/gtest.h>

#include <random>
#include <regex>

#include "sample/char_dfa.h"
#include "sample/gbnf.h"
#include "sample/gbnf_matcher.h"

namespace ss {
namespace {

std::shared_ptr<const Gbnf> compiled(const std::string& pattern) {
  auto text = regex_to_gbnf(pattern);
  EXPECT_TRUE(text.ok()) << pattern << ": " << (text.ok() ? "" : text.error().message);
  if (!text.ok()) return nullptr;
  auto g = Gbnf::parse(text.value());
  EXPECT_TRUE(g.ok()) << pattern << " -> " << text.value() << ": " << (g.ok() ? "" : g.error().message);
  return g.ok() ? *g : nullptr;
}

bool matches(const std::shared_ptr<const Gbnf>& g, const std::string& text) {
  GbnfMatcher m(g);
  return m.feed(text) && m.can_end();
}

// Random patterns over a small alphabet, in the supported syntax.
class PatternMaker {
 public:
  explicit PatternMaker(std::mt19937& rng) : rng_(rng) {}
  std::string make(int depth = 0) {
    std::string out;
    const int alts = pick(4) == 0 ? 2 : 1;
    for (int a = 0; a < alts; ++a) {
      if (a) out += "|";
      for (int k = 1 + pick(3); k > 0; --k) {
        out += atom(depth);
        out += quantifier();
      }
    }
    return out;
  }

 private:
  int pick(int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng_); }
  std::string atom(int depth) {
    static const char* const kAtoms[] = {"a",   "b",   "1",   "\\.", " ", "-",      "[ab]",  "[^a]",    "[a-c1]",
                                         "\\d", "\\w", "\\s", "\\D", ".", "[\\d.]", "\\x62", "\\u0061", "[-a]"};
    if (depth < 2 && pick(5) == 0) {
      const std::string inner = make(depth + 1);
      return (pick(2) ? "(" : "(?:") + inner + ")";
    }
    return kAtoms[pick(static_cast<int>(std::size(kAtoms)))];
  }
  std::string quantifier() {
    switch (pick(9)) {
      case 0:
        return "*";
      case 1:
        return "+";
      case 2:
        return "?";
      case 3: {
        const int lo = pick(3);
        const int hi = lo + pick(3);
        return "{" + std::to_string(lo) + "," + std::to_string(hi) + "}";
      }
      case 4:
        return "{2}";
      case 5:
        return "*?";
      default:
        return "";
    }
  }
  std::mt19937& rng_;
};

// Up to six characters of the patterns' alphabet.
std::string random_text(std::mt19937& rng) {
  static const std::string alphabet = "ab1.- c";
  std::string s;
  for (int n = std::uniform_int_distribution<int>(0, 6)(rng); n > 0; --n)
    s += alphabet[std::uniform_int_distribution<size_t>(0, alphabet.size() - 1)(rng)];
  return s;
}

TEST(RegexToGbnf, AgreesWithStdRegexOnRandomPatterns) {
  std::mt19937 rng(11);
  int patterns = 0, texts = 0, matched = 0;
  for (int round = 0; round < 300; ++round) {
    const std::string pattern = PatternMaker(rng).make();
    auto g = compiled(pattern);
    ASSERT_TRUE(g) << pattern;
    const std::regex re(pattern, std::regex::ECMAScript);
    ++patterns;
    for (int k = 0; k < 40; ++k) {
      const std::string s = random_text(rng);
      const bool want = std::regex_match(s, re);
      matched += want;
      ++texts;
      EXPECT_EQ(matches(g, s), want) << "/" << pattern << "/ on '" << s << "'";
    }
  }
  EXPECT_GT(matched, texts / 20);  // the texts hit the patterns often enough to mean something
  std::printf("%d patterns, %d texts, %d matched\n", patterns, texts, matched);
}

// JSON Schema's reading (found anywhere unless anchored) as an automaton
// with length limits (char_dfa.h), against std::regex_search and a count.
TEST(RegexToGbnf, SearchAutomataAgreeWithStdRegexSearchAndLengths) {
  std::mt19937 rng(12);
  int patterns = 0, texts = 0, matched = 0, refused = 0;
  for (int round = 0; round < 300; ++round) {
    const std::string pattern = PatternMaker(rng).make();
    const uint32_t lo = rng() % 3 == 0 ? static_cast<uint32_t>(rng() % 4) : 0;
    const uint32_t hi = rng() % 3 == 0 ? lo + static_cast<uint32_t>(rng() % 5) : CharDfa::kNoLimit;
    auto text = regex_to_gbnf(pattern, RegexMatch::Search);
    if (!text.ok()) {  // only '^' or '$' beside top-level alternatives
      EXPECT_NE(text.error().message.find("beside alternatives"), std::string::npos) << pattern;
      ++refused;
      continue;
    }
    auto g = Gbnf::parse(*text);
    ASSERT_TRUE(g.ok()) << pattern << " -> " << *text;
    auto dfa = CharDfa::build(*g, lo, hi);
    const std::regex re(pattern, std::regex::ECMAScript);
    ++patterns;
    for (int k = 0; k < 40; ++k) {
      const std::string s = random_text(rng);
      const bool want = std::regex_search(s, re) && s.size() >= lo && s.size() <= hi;
      matched += want;
      ++texts;
      if (!dfa.ok()) {  // only when no text of those lengths matches
        EXPECT_FALSE(want) << "/" << pattern << "/ [" << lo << "," << hi << "] " << dfa.error().message;
        continue;
      }
      // Every prefix of a text that matches keeps a state.
      int32_t st = (*dfa)->start();
      for (size_t i = 0; i < s.size() && st != CharDfa::kDead; ++i) st = (*dfa)->step(st, static_cast<uint8_t>(s[i]));
      EXPECT_EQ(st != CharDfa::kDead && (*dfa)->accepts(st), want)
          << "/" << pattern << "/ [" << lo << "," << hi << "] on '" << s << "'";
    }
  }
  EXPECT_GT(matched, texts / 10);
  EXPECT_LT(refused, 60);
  std::printf("%d patterns (%d refused), %d texts, %d matched\n", patterns, refused, texts, matched);
}

// A state is kept only if some text can still finish from it.
TEST(CharDfa, EveryStateCanStillFinish) {
  auto dfa_of = [](const std::string& pattern, uint32_t lo, uint32_t hi) {
    auto g = Gbnf::parse(regex_to_gbnf(pattern, RegexMatch::Search).value());
    return CharDfa::build(g.value(), lo, hi);
  };
  auto run = [](const CharDfa& d, const std::string& s) { return d.run(d.start(), s); };
  // "[ab]*c" in at most 3 characters: after "aa" only 'c' fits.
  auto d = dfa_of("^[ab]*c$", 0, 3).value();
  EXPECT_NE(run(*d, "aa"), CharDfa::kDead);
  EXPECT_EQ(run(*d, "aaa"), CharDfa::kDead);
  EXPECT_TRUE(d->accepts(run(*d, "aac")));
  // Unanchored: anything around it, but it must come.
  auto b = dfa_of("b", 2, CharDfa::kNoLimit).value();
  EXPECT_FALSE(b->accepts(run(*b, "b")));  // too short
  EXPECT_TRUE(b->accepts(run(*b,
                             "\xE4\xB8\xAD"
                             "b")));
  EXPECT_FALSE(b->accepts(run(*b, "acc")));
  EXPECT_NE(run(*b, "acc"), CharDfa::kDead);
  // Lengths no text of the pattern has, and automata past the caps.
  EXPECT_FALSE(dfa_of("^a{3}$", 0, 2).ok());
  EXPECT_FALSE(dfa_of("^(aa)*$", 3, 3).ok());
  EXPECT_TRUE(dfa_of("^(aa)*$", 3, 4).ok());
  auto wide = dfa_of("[ab]*a[ab]{14}", 0, CharDfa::kNoLimit);  // 2^15 states
  ASSERT_FALSE(wide.ok());
  EXPECT_NE(wide.error().message.find("more than"), std::string::npos) << wide.error().message;
}

TEST(RegexToGbnf, WholeTextsEscapesAndUnicode) {
  auto date = compiled("^\\d{4}-\\d{2}-\\d{2}$");
  EXPECT_TRUE(matches(date, "2026-12-07"));
  EXPECT_FALSE(matches(date, "2026-12-7"));
  EXPECT_FALSE(matches(date, "x2026-12-07"));              // whole texts only, as vLLM's guided_regex
  auto uni = compiled("caf\\u00e9|[\xC3\xA0-\xC3\xBF]+");  // é, and à..ÿ written as UTF-8
  EXPECT_TRUE(matches(uni, "caf\xC3\xA9"));
  EXPECT_TRUE(matches(uni, "\xC3\xA0\xC3\xBF"));
  EXPECT_FALSE(matches(uni, "cafe"));
  auto dot = compiled("a.c");
  EXPECT_TRUE(matches(dot,
                      "a\xE4\xB8\xAD"
                      "c"));
  EXPECT_FALSE(matches(dot, "a\nc"));  // '.' stops at line terminators
  auto marks = compiled("\\(\\)\\[\\]\\{\\}\\*\\+\\?\\|\\^\\$\\/\\\\");
  EXPECT_TRUE(matches(marks, "()[]{}*+?|^$/\\"));
  auto named = compiled("(?<year>\\d\\d)(a|)[]?[^]");
  EXPECT_TRUE(matches(named, "12ax"));
  EXPECT_TRUE(matches(named, "12\n"));
}

TEST(RegexToGbnf, RefusesWhatItCannotExpress) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"(a)\\1", "backreferences"},
      {"a(?=b)", "lookarounds"},
      {"(?!a)b", "lookarounds"},
      {"\\bword", "word boundaries"},
      {"a^b", "anchors"},
      {"a$b", "anchors"},
      {"[\\D]", "inside a class"},
      {"*a", "follows nothing"},
      {"a**", "after a quantifier"},
      {"(a", "expected ')'"},
      {"a)", "unexpected ')'"},
      {"[ab", "unterminated class"},
      {"[b-a]", "ends before it starts"},
      {"\\q", "unknown escape"},
      {"\\x4", "hex digits"},
      {"a{2", "not a quantifier"},
      {"a\\", "ends the pattern"},
      {"\xFF", "invalid UTF-8"},
  };
  for (const auto& [pattern, want] : cases) {
    auto r = regex_to_gbnf(pattern);
    ASSERT_FALSE(r.ok()) << pattern;
    EXPECT_NE(r.error().message.find(want), std::string::npos) << pattern << ": " << r.error().message;
  }
  std::string deep;
  for (int i = 0; i < 100; ++i) deep += "(";
  deep += "a";
  for (int i = 0; i < 100; ++i) deep += ")";
  EXPECT_FALSE(regex_to_gbnf(deep).ok());
  // JSON Schema's reading anchors one end per '^' / '$': with alternatives
  // at the top each would anchor one of them alone.
  EXPECT_FALSE(regex_to_gbnf("^a|b", RegexMatch::Search).ok());
  EXPECT_FALSE(regex_to_gbnf("a|b$", RegexMatch::Search).ok());
  EXPECT_TRUE(regex_to_gbnf("^(a|b)$", RegexMatch::Search).ok());
  EXPECT_TRUE(regex_to_gbnf("a|b", RegexMatch::Search).ok());
}

}  // namespace
}  // namespace ss
