// GBNF token references (<[id]>, <text>, !<...>; gbnf.h): parsing against a
// vocabulary, the matcher against the oracle of gbnf_test_support.h on
// random grammars with references and random token sequences (whole,
// prefixes, mutations), masks against feeding each token alone, and the
// cases the random ones rarely meet.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>

#include "sample/constraint.h"
#include "sample/gbnf.h"
#include "sample/gbnf_matcher.h"
#include "sample/gbnf_test_support.h"
#include "sample/token_trie.h"

namespace ss {
namespace {

using gbnf_test::GrammarMaker;
using gbnf_test::Oracle;
using gbnf_test::TextMaker;
using gbnf_test::Tok;

// test_vocab() (id 0, without bytes, ends generation) and two control
// tokens without bytes, <think> and </think>; <ab> and <x> are the tokens
// of those texts, as a tokenizer reads them.
struct RefVocab {
  std::vector<std::string> bytes = gbnf_test::test_vocab();
  int32_t think = 0, end_think = 0;
  GbnfTokens tokens;
  std::map<std::string, int32_t> ids;
  RefVocab() {
    for (size_t id = 1; id < bytes.size(); ++id) ids.emplace(bytes[id], static_cast<int32_t>(id));
    think = static_cast<int32_t>(bytes.size());
    end_think = think + 1;
    bytes.push_back("");
    bytes.push_back("");
    tokens.vocab_size = static_cast<int64_t>(bytes.size());
    tokens.ends = {0};
    tokens.token_of = [this](std::string_view text) -> std::optional<int32_t> {
      if (text == "<think>") return think;
      if (text == "</think>") return end_think;
      if (text == "<ab>") return ids.at("ab");
      if (text == "<x>") return ids.at("x");
      return std::nullopt;
    };
  }
  Tok tok(int32_t id) const { return {id, bytes[static_cast<size_t>(id)]}; }
  // Tokens of whole characters of the alphabet or none, end-of-generation
  // aside: what the oracle reads.
  std::vector<int32_t> whole() const {
    std::vector<int32_t> out;
    for (size_t id = 1; id < bytes.size(); ++id) {
      size_t at = 0;
      for (bool more = true; more && at < bytes[id].size();) {
        more = false;
        for (const std::string& c : gbnf_test::kAlphabet)
          if (bytes[id].compare(at, c.size(), c) == 0) {
            at += c.size();
            more = true;
            break;
          }
      }
      if (at == bytes[id].size()) out.push_back(static_cast<int32_t>(id));
    }
    return out;
  }
};

std::shared_ptr<const Gbnf> parsed(const std::string& text, const RefVocab& v) {
  auto g = Gbnf::parse(text, &v.tokens);
  EXPECT_TRUE(g.ok()) << text << ": " << (g.ok() ? "" : g.error().message);
  return g.ok() ? *g : nullptr;
}

// Fed token by token: false if one is refused.
bool feed_all(GbnfMatcher& m, const std::vector<Tok>& toks) {
  for (const Tok& t : toks)
    if (!m.feed_token(t.id, t.bytes)) return false;
  return true;
}

TEST(GbnfTokens, ParsesReferencesAgainstTheVocabulary) {
  const RefVocab v;
  auto g = parsed("root ::= <think> (!</think>)* </think> \"a\"+ <[3]> !<[0]>\n", v);
  ASSERT_TRUE(g);
  const std::vector<std::pair<std::string, std::string>> refused = {
      {"root ::= <[" + std::to_string(v.bytes.size()) + "]>\n", "past the vocabulary"},
      {"root ::= <[99999999999]>\n", "expected a token id"},
      {"root ::= <[1a]>\n", "expected a token id"},
      {"root ::= <[]>\n", "expected a token id"},
      {"root ::= <nope>\n", "'<nope>' is not one token"},
      {"root ::= <think\n", "without '>'"},
      {"root ::= !\"a\"\n", "expected '<'"},
      {"root ::= \"a\" <[0]>\n", "token 0 ends generation"},
  };
  for (const auto& [text, want] : refused) {
    auto r = Gbnf::parse(text, &v.tokens);
    const std::string got = r.ok() ? "" : r.error().message;
    EXPECT_NE(got.find(want), std::string::npos) << text << " -> '" << got << "', wanted '" << want << "'";
  }
  auto none = Gbnf::parse("root ::= <[3]>\n");
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.error().message.find("need the model's vocabulary"), std::string::npos);
  EXPECT_NE(none.error().message.find("line 1, column 10"), std::string::npos);
}

TEST(GbnfTokens, AReferenceReadsATokenWholeAndNeverItsSpelling) {
  const RefVocab v;
  const int32_t a = v.ids.at("a"), b = v.ids.at("b"), ab = v.ids.at("ab");
  auto by_ref = parsed("root ::= <ab>\n", v);
  GbnfMatcher m1(by_ref);
  EXPECT_FALSE(m1.feed_token(a, "a"));  // the text "ab" in two tokens is not the token
  EXPECT_FALSE(m1.feed("ab"));          // nor is the text
  ASSERT_TRUE(m1.feed_token(ab, "ab"));
  EXPECT_TRUE(m1.complete());
  auto by_text = parsed("root ::= \"ab\"\n", v);
  GbnfMatcher m2(by_text);
  ASSERT_TRUE(m2.feed_token(ab, "ab"));  // a literal reads the token's characters
  EXPECT_TRUE(m2.complete());
  GbnfMatcher m3(by_text);
  EXPECT_FALSE(m3.feed_token(v.think, ""));  // a control token has no characters
  ASSERT_TRUE(m3.feed_token(a, "a"));
  ASSERT_TRUE(m3.feed_token(b, "b"));
  EXPECT_TRUE(m3.complete());
}

TEST(GbnfTokens, ThinkingBlockThenAnAnswer) {
  // llama.cpp's README example: a reasoning model's block, then the answer.
  const RefVocab v;
  auto g = parsed("root ::= <think> thinking </think> [a-c]+\nthinking ::= !</think>*\n", v);
  ASSERT_TRUE(g);
  const TokenTrie trie(v.bytes);
  const std::vector<int32_t> ends = {0};
  GbnfMatcher m(g);
  std::vector<float> logits(v.bytes.size(), 0.0f);
  EXPECT_EQ(m.mask(trie, logits, ends), 1u);  // only <think>
  EXPECT_FALSE(std::isinf(logits[static_cast<size_t>(v.think)]));
  ASSERT_TRUE(m.feed_token(v.think, ""));
  // Inside: any token but the end of generation, half characters too (they
  // are read whole, not as text).
  std::fill(logits.begin(), logits.end(), 0.0f);
  EXPECT_EQ(m.mask(trie, logits, ends), v.bytes.size() - 1);
  EXPECT_TRUE(std::isinf(logits[0]));
  for (const char* half : {"\xC3", "\xFF", "\xA9"}) ASSERT_TRUE(m.feed_token(v.ids.at(half), half)) << half;
  ASSERT_TRUE(m.feed_token(v.think, ""));
  ASSERT_TRUE(m.feed_token(v.end_think, ""));
  EXPECT_FALSE(m.can_end());
  EXPECT_FALSE(m.feed_token(v.ids.at("x"), "x"));
  ASSERT_TRUE(m.feed_token(v.ids.at("ab"), "ab"));
  EXPECT_TRUE(m.can_end());
  std::fill(logits.begin(), logits.end(), 0.0f);
  m.mask(trie, logits, ends);
  EXPECT_FALSE(std::isinf(logits[0]));                                // may end now
  EXPECT_TRUE(std::isinf(logits[static_cast<size_t>(v.end_think)]));  // no reference is open
  EXPECT_FALSE(std::isinf(logits[static_cast<size_t>(v.ids.at("cc"))]));
}

TEST(GbnfTokens, ATokenBothReadingsTakeThatEndsMidCharacterKeepsTheCharacterReading) {
  // "\xC3" is a token !<x> takes whole and the start of é for the class: one
  // partial character is kept for every parse, so the reference's parse is
  // dropped (and said to be).
  const RefVocab v;
  auto g = parsed("root ::= (!<x> \"b\") | [\xC3\xA9] \"a\"\n", v);
  GbnfMatcher m(g);
  ASSERT_TRUE(m.feed_token(v.ids.at("\xC3"), "\xC3"));
  EXPECT_TRUE(m.dropped_parses());
  EXPECT_FALSE(m.feed_token(v.ids.at("b"), "b"));
  ASSERT_TRUE(m.feed_token(v.ids.at("\xA9"
                                    "a"),
                           "\xA9"
                           "a"));
  EXPECT_TRUE(m.complete());
  // Whole characters: both readings go on side by side.
  GbnfMatcher both(g);
  ASSERT_TRUE(both.feed_token(v.ids.at("\xC3\xA9"), "\xC3\xA9"));
  EXPECT_FALSE(both.dropped_parses());
  EXPECT_EQ(both.open_parses(), 2u);
}

TEST(GbnfTokens, MatcherAgreesWithTheOracleOnRandomGrammarsAndTokens) {
  const RefVocab v;
  const std::vector<int32_t> whole = v.whole();
  std::mt19937 rng(20261208);
  auto any_of = [&](const std::vector<int32_t>& ids) {
    return ids[std::uniform_int_distribution<size_t>(0, ids.size() - 1)(rng)];
  };
  auto token_for = [&](const GbnfElem& e) {
    if (!e.negated) return v.tok(static_cast<int32_t>(e.value));
    int32_t id = 0;
    do id = any_of(whole);
    while (static_cast<uint32_t>(id) == e.value);
    return v.tok(id);
  };
  const std::vector<std::string> refs = {"<think>", "</think>", "!</think>", "!<think>",
                                         "<ab>",    "!<x>",     "<[1]>",     "!<[2]>"};
  int grammars = 0, inputs = 0, accepted = 0, capped = 0, referenced = 0;
  for (int round = 0; round < 300; ++round) {
    const std::string text = GrammarMaker(rng, refs).make();
    auto g = Gbnf::parse(text, &v.tokens);
    if (!g.ok()) {
      EXPECT_NE(g.error().message.find("left-recursive"), std::string::npos) << text << g.error().message;
      continue;
    }
    ++grammars;
    TextMaker maker(**g, rng, token_for);
    for (int k = 0; k < 30; ++k) {
      std::vector<Tok> pieces;
      if (!maker.make(pieces)) continue;
      std::vector<Tok> toks;
      for (const Tok& p : pieces) {
        const Tok t = p.id >= 0 ? p : v.tok(v.ids.at(p.bytes));
        // Two characters side by side may come as one token.
        if (p.id < 0 && !toks.empty() && toks.back().bytes.size() == 1 && t.bytes.size() == 1 && rng() % 3 == 0 &&
            v.ids.count(toks.back().bytes + t.bytes))
          toks.back() = v.tok(v.ids.at(toks.back().bytes + t.bytes));
        else
          toks.push_back(t);
        referenced += p.id >= 0;
      }
      if (k % 2) {  // a mutation: a token dropped, added or replaced
        const size_t at = std::uniform_int_distribution<size_t>(0, toks.size())(rng);
        const int what = static_cast<int>(rng() % 3);
        if (what == 0 && at < toks.size()) toks.erase(toks.begin() + static_cast<ptrdiff_t>(at));
        if (what == 1) toks.insert(toks.begin() + static_cast<ptrdiff_t>(at), v.tok(any_of(whole)));
        if (what == 2 && at < toks.size()) toks[at] = v.tok(any_of(whole));
      }
      if (k % 5 == 4) toks.resize(toks.size() / 2);
      ++inputs;
      Oracle oracle(**g, toks);
      const bool want = oracle.accepts();
      accepted += want;
      GbnfMatcher m(*g);
      const bool fed = feed_all(m, toks);
      if (m.dropped_parses()) {
        ++capped;
        EXPECT_TRUE(!(fed && m.can_end()) || want) << text;
        continue;
      }
      std::string shown;
      for (const Tok& t : toks) shown += std::to_string(t.id) + "'" + t.bytes + "' ";
      EXPECT_EQ(fed && m.can_end(), want) << text << " tokens: " << shown;
      EXPECT_EQ(fed, oracle.prefix()) << text << " prefix of " << toks.size() << " tokens";
    }
  }
  EXPECT_GT(grammars, 150);
  EXPECT_GT(referenced, inputs);  // references are common, not a corner
  EXPECT_LT(capped, inputs / 8);
  EXPECT_GT(accepted, inputs / 4);
  EXPECT_LT(accepted, inputs * 9 / 10);
  std::printf("%d grammars, %d token sequences (%d referenced tokens), %d accepted, %d past the caps\n", grammars,
              inputs, referenced, accepted, capped);
}

TEST(GbnfTokens, MaskEqualsFeedingEachToken) {
  const RefVocab v;
  const TokenTrie trie(v.bytes);
  const std::vector<int32_t> ends = {0};
  std::mt19937 rng(11);
  const std::vector<std::string> refs = {"<think>", "</think>", "!</think>", "<ab>", "!<x>", "<[5]>"};
  int walks = 0, steps = 0, by_reference = 0;
  for (int round = 0; round < 120; ++round) {
    auto g = Gbnf::parse(GrammarMaker(rng, refs).make(), &v.tokens);
    if (!g.ok()) continue;
    ++walks;
    GbnfMatcher m(*g);
    std::vector<Tok> fed;
    for (int step = 0; step < 12; ++step) {
      std::vector<float> logits(v.bytes.size() + 2, 1.0f);  // two ids past the vocabulary: always masked
      const size_t allowed = m.mask(trie, logits, ends);
      size_t counted = 0;
      std::vector<int32_t> ok_ids;
      for (size_t id = 0; id < logits.size(); ++id) {
        bool want = false;
        if (id == 0) {
          want = m.can_end();
        } else if (id < v.bytes.size()) {
          GbnfMatcher fresh(*g);
          want = feed_all(fresh, fed) && fresh.feed_token(static_cast<int32_t>(id), v.bytes[id]);
        }
        EXPECT_EQ(!std::isinf(logits[id]), want) << "token " << id << " after " << fed.size() << " tokens";
        counted += !std::isinf(logits[id]);
        if (want && id != 0) ok_ids.push_back(static_cast<int32_t>(id));
        by_reference += want && id < v.bytes.size() && v.bytes[id].empty();
      }
      EXPECT_EQ(allowed, counted);
      ++steps;
      if (ok_ids.empty()) break;
      const int32_t pick = ok_ids[std::uniform_int_distribution<size_t>(0, ok_ids.size() - 1)(rng)];
      ASSERT_TRUE(m.feed_token(pick, v.bytes[static_cast<size_t>(pick)]));
      fed.push_back(v.tok(pick));
    }
  }
  EXPECT_GT(walks, 60);
  EXPECT_GT(steps, 400);
  EXPECT_GT(by_reference, 50);  // control tokens, which only references take, were allowed often
}

TEST(GbnfTokens, ConstraintFeedsTokenIds) {
  const RefVocab v;
  auto g = parsed("root ::= \"a\" <think>\n", v);
  Constraint c(nullptr, g);
  const ConstraintVocab vocab(v.bytes, {0});
  std::vector<float> logits(v.bytes.size(), 0.0f);
  logits[static_cast<size_t>(v.think)] = 9.0f;  // likeliest, but "a" must come first
  auto argmax = [](std::span<const float> l) {
    return static_cast<int32_t>(std::max_element(l.begin(), l.end()) - l.begin());
  };
  auto is_end = [](int32_t id) { return id == 0; };
  size_t allowed = c.mask(vocab, logits, true);
  EXPECT_EQ(sample_and_feed(c, vocab, logits, allowed, argmax, is_end), v.ids.at("a"));
  std::fill(logits.begin(), logits.end(), 0.0f);
  allowed = c.mask(vocab, logits, true);
  EXPECT_EQ(allowed, 1u);
  EXPECT_EQ(sample_and_feed(c, vocab, logits, allowed, argmax, is_end), v.think);
  EXPECT_TRUE(c.complete());
}

}  // namespace
}  // namespace ss
