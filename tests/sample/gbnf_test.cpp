// GBNF grammars: the parser (gbnf.h) on llama.cpp's syntax and its
// refusals, and the matcher (gbnf_matcher.h) against an independent oracle
// (a memoized recursive-descent recognizer over the parsed rules, in
// gbnf_test_support.h: whole texts and viable prefixes) on random grammars,
// texts and mutations, and its mask against token-by-token feeding. Token
// references: gbnf_tokens_test.cpp.
#include "sample/gbnf.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <set>

#include "sample/constraint.h"
#include "sample/gbnf_matcher.h"
#include "sample/gbnf_test_support.h"
#include "sample/token_trie.h"
#include "util/utf8.h"

namespace ss {
namespace {

using gbnf_test::GrammarMaker;
using gbnf_test::kAlphabet;
using gbnf_test::mutate;
using gbnf_test::Oracle;
using gbnf_test::test_vocab;
using gbnf_test::TextMaker;

std::shared_ptr<const Gbnf> parsed(const std::string& text) {
  auto g = Gbnf::parse(text);
  EXPECT_TRUE(g.ok()) << text << ": " << (g.ok() ? "" : g.error().message);
  return g.ok() ? *g : nullptr;
}

std::string parse_error(const std::string& text) {
  auto g = Gbnf::parse(text);
  return g.ok() ? "" : g.error().message;
}

// Fed byte by byte (UTF-8 characters split across feeds): may the text end here?
bool accepts(const std::shared_ptr<const Gbnf>& g, const std::string& text, bool* dropped = nullptr) {
  GbnfMatcher m(g);
  bool fed = true;
  for (size_t i = 0; i < text.size() && fed; ++i) fed = m.feed(text.substr(i, 1));
  if (dropped) *dropped = m.dropped_parses();
  return fed && m.can_end();
}
bool viable(const std::shared_ptr<const Gbnf>& g, const std::string& text) {
  GbnfMatcher m(g);
  return m.feed(text);
}

// ---- Parsing ----

TEST(Gbnf, ParsesLlamaCppSyntax) {
  // Shaped like llama.cpp's grammars/ examples: comments, multi-line rules
  // after '|' and inside parentheses, classes, escapes, repetitions.
  const std::string arithmetic =
      "root  ::= (expr \"=\" ws term \"\\n\")+\n"
      "expr  ::= term ([-+*/] term)*\n"
      "term  ::= ident | num | \"(\" ws expr \")\" ws\n"
      "ident ::= [a-z] [a-z0-9_]* ws\n"
      "num   ::= [0-9]+ ws\n"
      "ws    ::= [ \\t\\n]*\n";
  auto g = parsed(arithmetic);
  ASSERT_TRUE(g);
  EXPECT_TRUE(accepts(g, "1+2= 3\n"));
  EXPECT_TRUE(accepts(g, "(a1 *2)=b\nx=y\n"));
  EXPECT_FALSE(accepts(g, "1+2=3"));  // the newline is required
  EXPECT_FALSE(viable(g, "1++"));     // an operator needs a term
  EXPECT_TRUE(viable(g, "(a1 *(2"));  // an open parenthesis may still close

  auto chess = parsed(
      "# moves\n"
      "root ::= (\n"
      "    \"1. \" move \" \" move \"\\n\"\n"
      "    ([1-9] [0-9]? \". \" move \" \" move \"\\n\")+\n"
      ")\n"
      "move ::= (pawn | nonpawn | castle) [+#]?\n"
      "pawn ::= [a-h] [1-8]\n"
      "nonpawn ::= [NBKQR] [a-h]? [1-8]? \"x\"? [a-h] [1-8]\n"
      "castle ::= \"O-O\" \"-O\"?\n");
  ASSERT_TRUE(chess);
  EXPECT_TRUE(accepts(chess, "1. e4 e5\n2. Nf3 Nc6\n"));
  EXPECT_FALSE(accepts(chess, "1. e4 e5\n"));  // one more move pair at least

  // Escapes and repetition counts.
  auto e = parsed("root ::= \"\\x41\\u00e9\\U0001F600\" [\\[\\]\\\\]{2} \"\\\"\"{1,2} \"q\"{2,}\r\n");
  ASSERT_TRUE(e);
  EXPECT_TRUE(accepts(e, "A\xC3\xA9\xF0\x9F\x98\x80[\\\"qq"));
  EXPECT_TRUE(accepts(e, "A\xC3\xA9\xF0\x9F\x98\x80]]\"\"qqqq"));
  EXPECT_FALSE(accepts(e, "A\xC3\xA9\xF0\x9F\x98\x80]]\"\"\"qq"));  // at most two quotes
  EXPECT_FALSE(accepts(e, "A\xC3\xA9\xF0\x9F\x98\x80[]\"q"));       // at least two q
  // A literal repeats whole, as in llama.cpp; a repetition of a repetition repeats it.
  auto lit = parsed("root ::= \"ab\"* \"c\"{2}{2}\n");
  ASSERT_TRUE(lit);
  EXPECT_TRUE(accepts(lit, "ababcccc"));
  EXPECT_FALSE(accepts(lit, "abacccc"));
  EXPECT_FALSE(accepts(lit, "ccc"));
  // Empty alternatives, '.', negated classes.
  auto misc = parsed("root ::= . [^\\n\"]* (\"!\" | )\n");
  ASSERT_TRUE(misc);
  EXPECT_TRUE(accepts(misc, "\xE4\xB8\xADok!"));
  EXPECT_TRUE(accepts(misc, "\"ok"));
  EXPECT_FALSE(viable(misc, "a\"b"));
  EXPECT_FALSE(accepts(misc, ""));
}

TEST(Gbnf, RefusesBadGrammarsNamingThePlace) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"root ::= x\n", "rule 'x' is used but not defined (line 1, column 10)"},
      {"a ::= \"x\"\n", "no 'root' rule"},
      {"root ::= root \"a\" | \"b\"\n", "left-recursive"},
      {"root ::= a\na ::= b \"x\"\nb ::= \"\" | a\n", "left-recursive"},
      {"root ::= a root \"x\" | \"y\"\na ::= \"z\"?\n", "left-recursive"},  // through a rule that may be empty
      {"root ::= a \"x\"\na ::= b | \"y\"\nb ::= a \"z\"\n", "left-recursive"},
      {"root ::= \"a\"\nroot ::= \"b\"\n", "defined twice (line 2, column 1)"},
      {"root ::= <think> \"x\"\n", "token references"},
      {"root ::= \"abc\n", "unexpected end"},
      {"root ::= \"abc", "unexpected end"},
      {"root ::= [abc\n", "unexpected end"},
      {"root ::= \"\\q\"\n", "unknown escape"},
      {"root ::= \"\\xZZ\"\n", "hex digits"},
      {"root ::= \"\xC0\xAF\"\n", "invalid UTF-8"},
      {"root ::= \"\xED\xA0\x80\"\n", "invalid UTF-8"},
      {"root ::= [z-a]\n", "ends before it starts"},
      {"root ::= * \"a\"\n", "follows nothing"},
      {"root ::= \"a\"{3,2}\n", "under its least"},
      {"root ::= \"a\"{2001}\n", "more than 2000 repetitions"},
      {"root ::= (\"a\"{2000}){2000}{2000}\n", "elements once repetitions are written out"},
      {"root ::= \"a\" \"b\"\n  \"c\"\n", "expected a rule name (line 2, column 3)"},
      {"root := \"a\"\n", "expected '::='"},
      {"root ::= (\"a\"\n", "expected ')'"},
      {std::string("root ::= \"a\" ") + '\0' + "\n", "expected the end"},
  };
  for (const auto& [text, want] : cases) {
    const std::string got = parse_error(text);
    EXPECT_NE(got.find(want), std::string::npos) << text << " -> '" << got << "', wanted '" << want << "'";
  }
  std::string deep = "root ::= ";
  for (int i = 0; i < 100; ++i) deep += "(";
  deep += "\"a\"";
  for (int i = 0; i < 100; ++i) deep += ")";
  EXPECT_NE(parse_error(deep + "\n").find("nest deeper than 64"), std::string::npos);
  // A long chain of rules is no recursion for the checks (40k rules).
  std::string chain = "root ::= r1\n";
  for (int i = 1; i < 40000; ++i) chain += "r" + std::to_string(i) + " ::= r" + std::to_string(i + 1) + "\n";
  chain += "r40000 ::= \"end\"\n";
  auto g = parsed(chain);
  ASSERT_TRUE(g);
  EXPECT_TRUE(accepts(g, "end"));
  EXPECT_NE(parse_error(chain + "r40000 ::= root\n").find("defined twice"), std::string::npos);
}

TEST(Gbnf, Choice) {
  const std::vector<std::string> choices = {"yes", "no", "maybe \"so\"", "\xC3\xA9t\xC3\xA9\n"};
  auto g = Gbnf::choice(choices);
  ASSERT_TRUE(g.ok()) << g.error().message;
  for (const auto& c : choices) EXPECT_TRUE(accepts(*g, c)) << c;
  EXPECT_FALSE(accepts(*g, "ye"));
  EXPECT_FALSE(viable(*g, "yes!"));
  EXPECT_FALSE(Gbnf::choice({}).ok());
}

// ---- Matching ----

TEST(GbnfMatcher, AgreesWithTheOracleOnRandomGrammars) {
  std::mt19937 rng(20261207);
  int grammars = 0, refused = 0, texts = 0, accepted = 0, capped = 0;
  for (int round = 0; round < 400; ++round) {
    const std::string text = GrammarMaker(rng).make();
    auto g = Gbnf::parse(text);
    if (!g.ok()) {
      // Random grammars may be left-recursive; nothing else may fail.
      EXPECT_NE(g.error().message.find("left-recursive"), std::string::npos) << text << g.error().message;
      ++refused;
      continue;
    }
    ++grammars;
    TextMaker maker(**g, rng);
    for (int k = 0; k < 30; ++k) {
      std::string s;
      if (!maker.make(s)) continue;
      if (k % 2) s = mutate(s, rng);
      if (k % 5 == 4) s = s.substr(0, s.size() / 2);  // may split a character
      ++texts;
      Oracle oracle(**g, s);
      Utf8StreamBuffer chars;
      const bool whole_chars = chars.push(s) == s;  // a split character is never a whole text
      const bool whole = whole_chars && oracle.accepts();
      accepted += whole;
      bool dropped = false;
      const bool got = accepts(*g, s, &dropped);
      if (dropped) {
        // Past the caps the matcher may refuse what a dropped parse takes, never more.
        ++capped;
        EXPECT_TRUE(!got || whole) << text << "text: '" << s << "'";
        continue;
      }
      EXPECT_EQ(got, whole) << text << "text: '" << s << "'";
      if (whole_chars) {
        // Prefixes on character boundaries: viable iff the oracle finds a completion.
        EXPECT_EQ(viable(*g, s), oracle.prefix()) << text << "prefix: '" << s << "'";
      }
    }
  }
  EXPECT_GT(grammars, 200);
  EXPECT_LT(capped, texts / 8);  // measured 4-6%
  EXPECT_GT(accepted, texts / 4);
  EXPECT_LT(accepted, texts * 9 / 10);
  RecordProperty("grammars", grammars);
  RecordProperty("refused", refused);
  std::printf("%d grammars (%d refused), %d texts, %d accepted, %d past the caps\n", grammars, refused, texts, accepted,
              capped);
}

TEST(GbnfMatcher, MaskEqualsFeedingEachToken) {
  std::mt19937 rng(7);
  const auto vocab = test_vocab();
  const TokenTrie trie(vocab);
  const std::vector<int32_t> ends = {0};  // the token without bytes stands for end-of-generation
  int walks = 0, steps = 0;
  for (int round = 0; round < 120; ++round) {
    auto g = Gbnf::parse(GrammarMaker(rng).make());
    if (!g.ok()) continue;
    ++walks;
    GbnfMatcher m(*g);
    std::string text;
    for (int step = 0; step < 12; ++step) {
      std::vector<float> logits(vocab.size() + 2, 1.0f);  // two ids past the vocabulary: always masked
      const size_t allowed = m.mask(trie, logits, ends);
      size_t counted = 0;
      std::vector<int32_t> ok_ids;
      for (size_t id = 0; id < logits.size(); ++id) {
        bool want = false;
        if (id < vocab.size() && !vocab[id].empty()) {
          GbnfMatcher fresh(*g);
          want = fresh.feed(text) && fresh.feed(vocab[id]);
        }
        if (id == 0) want = m.can_end();
        EXPECT_EQ(!std::isinf(logits[id]), want) << "token " << id << " after '" << text << "'";
        counted += !std::isinf(logits[id]);
        if (want && id != 0) ok_ids.push_back(static_cast<int32_t>(id));
      }
      EXPECT_EQ(allowed, counted);
      ++steps;
      if (ok_ids.empty()) break;
      const int32_t pick = ok_ids[std::uniform_int_distribution<size_t>(0, ok_ids.size() - 1)(rng)];
      ASSERT_TRUE(m.feed(vocab[static_cast<size_t>(pick)]));
      text += vocab[static_cast<size_t>(pick)];
    }
  }
  EXPECT_GT(walks, 60);
  EXPECT_GT(steps, 400);
}

TEST(GbnfMatcher, ByteFallbackHalvesOfCharacters) {
  auto g = parsed("root ::= [\xE3\x81\x81-\xE3\x82\x9F]+ \"!\"\n");  // hiragana, llama.cpp's README example
  ASSERT_TRUE(g);
  GbnfMatcher m(g);
  EXPECT_TRUE(m.feed("\xE3"));
  EXPECT_FALSE(m.can_end());
  EXPECT_FALSE(m.feed("\x80"));  // U+3000.. is below the class
  EXPECT_TRUE(m.feed("\x81"));
  EXPECT_FALSE(m.feed("\x80"));  // U+3040 is just below it
  EXPECT_TRUE(m.feed("\x82"));   // U+3042
  EXPECT_TRUE(m.feed("!"));
  EXPECT_TRUE(m.complete());
  // Invalid UTF-8 never feeds, even where any character may come.
  auto any = parsed("root ::= .*\n");
  for (const char* bad : {"\xC0\x80", "\xE0\x80\x80", "\xED\xA0\x80", "\xF4\x90\x80\x80", "\x80", "\xFF"})
    EXPECT_FALSE(viable(any, bad)) << bad;
  EXPECT_TRUE(viable(any, "\xF4\x8F\xBF\xBF"));  // U+10FFFF
  // A negated class, judged on a partial character: [^é] takes a 0xC3 lead (other characters start so).
  auto not_e = parsed("root ::= [^\xC3\xA9]\n");
  EXPECT_TRUE(viable(not_e, "\xC3"));
  EXPECT_FALSE(viable(not_e, "\xC3\xA9"));
  EXPECT_TRUE(accepts(not_e, "\xC3\xA8"));
  auto only_e = parsed("root ::= [\xC3\xA9]\n");
  EXPECT_TRUE(viable(only_e, "\xC3"));
  EXPECT_FALSE(viable(only_e, "\xC4"));
}

TEST(GbnfMatcher, EndsAndCompletes) {
  auto g = parsed("root ::= \"a\" \"b\"?\n");
  GbnfMatcher m(g);
  EXPECT_FALSE(m.can_end());
  ASSERT_TRUE(m.feed("a"));
  EXPECT_TRUE(m.can_end());
  EXPECT_FALSE(m.complete());  // "b" may follow
  EXPECT_FALSE(m.feed("c"));
  EXPECT_TRUE(m.can_end());  // a refused feed changes nothing
  ASSERT_TRUE(m.feed("b"));
  EXPECT_TRUE(m.complete());
  EXPECT_FALSE(m.feed("b"));
}

TEST(GbnfMatcher, LongTextsKeepShortStacks) {
  // Right recursion is a tail call: a long text leaves one parse with a
  // short stack, and nested parentheses a stack as deep as they are.
  auto words = parsed("root ::= ([a-z]+ \" \")* \"END\"\n");
  GbnfMatcher m(words);
  std::string text;
  for (int i = 0; i < 20000; ++i) text += "word ";
  ASSERT_TRUE(m.feed(text));
  EXPECT_LE(m.open_parses(), 2u);
  ASSERT_TRUE(m.feed("END"));
  EXPECT_TRUE(m.complete());

  auto nest = parsed("root ::= \"(\" root \")\" | \"x\"\n");
  GbnfMatcher n(nest);
  ASSERT_TRUE(n.feed(std::string(5000, '(') + "x" + std::string(4999, ')')));
  EXPECT_FALSE(n.can_end());
  ASSERT_TRUE(n.feed(")"));
  EXPECT_TRUE(n.complete());
  EXPECT_FALSE(n.feed(")"));
  // Deeper than the node table's first rebuild (65536 nodes): the stacks
  // survive being moved to a fresh table.
  GbnfMatcher deep(nest);
  for (int i = 0; i < 70; ++i) ASSERT_TRUE(deep.feed(std::string(1000, '(')));
  ASSERT_TRUE(deep.feed("x"));
  for (int i = 0; i < 70; ++i) {
    EXPECT_FALSE(deep.complete());
    ASSERT_TRUE(deep.feed(std::string(1000, ')')));
  }
  EXPECT_TRUE(deep.complete());
}

TEST(GbnfMatcher, LoopsThroughRulesThatMayBeEmpty) {
  // llama.cpp takes these (its matcher stops at a stack it has met in the
  // step); so do we. They are not left recursion that grows the stack.
  auto items = parsed("root ::= item* \"!\"\nitem ::= [a-z]* | \" \"\n");
  ASSERT_TRUE(items);
  EXPECT_TRUE(accepts(items, "ab cd!"));
  EXPECT_TRUE(accepts(items, "!"));
  EXPECT_FALSE(viable(items, "ab1"));
  auto cycle = parsed("root ::= a\na ::= b\nb ::= a | \"x\"\n");
  ASSERT_TRUE(cycle);
  EXPECT_TRUE(accepts(cycle, "x"));
  EXPECT_FALSE(viable(cycle, "xx"));
}

TEST(GbnfMatcher, AmbiguousGrammarsStayBounded) {
  // Every split of a run of a's is a parse: the set stays deduplicated.
  auto g = parsed("root ::= (\"a\" | \"aa\" | \"a\"+)*\n");
  GbnfMatcher m(g);
  ASSERT_TRUE(m.feed(std::string(2000, 'a')));
  EXPECT_LE(m.open_parses(), GbnfMatcher::kMaxHeads);
  EXPECT_TRUE(m.can_end());
  // llama.cpp's documented slow case, x? written out many times, stays within the caps.
  std::string slow = "root ::= ";
  for (int i = 0; i < 40; ++i) slow += "\"x\"? ";
  auto s = parsed(slow + "\n");
  GbnfMatcher sm(s);
  ASSERT_TRUE(sm.feed("xxxx"));
  EXPECT_TRUE(sm.can_end());
}

TEST(GbnfMatcher, ACutMaskStaysASubsetAndKeepsTheFavourites) {
  auto g = parsed("root ::= [a-z\xC3\xA9]+\n");
  const auto vocab = test_vocab();
  const TokenTrie trie(vocab);
  std::vector<float> logits(vocab.size());
  for (size_t id = 0; id < logits.size(); ++id) logits[id] = static_cast<float>(id);  // later ids likelier
  std::vector<size_t> may;  // what may come next, likeliest first
  for (size_t id = vocab.size(); id-- > 1;)
    if (GbnfMatcher(g).feed(vocab[id])) may.push_back(id);
  ASSERT_GT(may.size(), 10u);
  GbnfMatcher::Limits tight;
  tight.max_mask_expansions = 4;
  tight.rescued = 3;
  GbnfMatcher m(g, tight);
  std::vector<float> cut = logits;
  const size_t allowed = m.mask(trie, cut, {});
  EXPECT_TRUE(m.mask_was_cut());
  EXPECT_LT(allowed, may.size());
  for (size_t id = 0; id < cut.size(); ++id)  // never more than may come
    EXPECT_TRUE(std::isinf(cut[id]) || GbnfMatcher(g).feed(vocab[id])) << id;
  for (size_t k = 0; k < 3; ++k) EXPECT_FALSE(std::isinf(cut[may[k]])) << may[k];  // the favourites stay
  GbnfMatcher whole(g);
  std::vector<float> all = logits;
  EXPECT_EQ(whole.mask(trie, all, {}), may.size());
  EXPECT_FALSE(whole.mask_was_cut());
}

TEST(Constraint, ATokenTheMaskAllowedButFeedingRefusesIsResampled) {
  // Feeding can refuse what a mask allowed only past a grammar's caps; the
  // loop is the same for any constraint, so a JSON one stands in here.
  Constraint c(JsonSchema::any_object(), nullptr);
  const ConstraintVocab vocab({"{", "x", "}"}, {});
  std::vector<float> masked = {1.0f, 5.0f, -std::numeric_limits<float>::infinity()};  // "x" wrongly allowed
  int draws = 0;
  auto argmax = [&](std::span<const float> l) {
    ++draws;
    return static_cast<int32_t>(std::max_element(l.begin(), l.end()) - l.begin());
  };
  EXPECT_EQ(sample_and_feed(c, vocab, masked, 2, argmax, [](int32_t) { return false; }), 0);
  EXPECT_EQ(draws, 2);
  EXPECT_TRUE(std::isinf(masked[1]));
  std::vector<float> none = {-1.0f, 5.0f, 0.0f};  // after "{": "x" again refused, then "}" closes
  EXPECT_EQ(sample_and_feed(c, vocab, none, 2, argmax, [](int32_t) { return false; }), 2);
  std::vector<float> dead = {1.0f, 5.0f, -std::numeric_limits<float>::infinity()};
  EXPECT_EQ(sample_and_feed(c, vocab, dead, 2, argmax, [](int32_t) { return false; }), -1);
}

TEST(TokenTrie, HoldsEveryTokenOnce) {
  const auto vocab = test_vocab();
  const TokenTrie trie(vocab);
  std::vector<int> seen(vocab.size(), 0);
  // Walk the trie rebuilding each token's bytes from its path.
  std::vector<std::pair<uint32_t, std::string>> todo{{0, ""}};
  while (!todo.empty()) {
    auto [n, path] = todo.back();
    todo.pop_back();
    for (const int32_t id : trie.tokens(trie.node(n))) {
      EXPECT_EQ(vocab[static_cast<size_t>(id)], path);
      ++seen[static_cast<size_t>(id)];
    }
    for (uint32_t e = trie.node(n).edge_begin; e < trie.node(n).edge_end; ++e)
      todo.emplace_back(trie.edge_child(e), path + static_cast<char>(trie.edge_byte(e)));
  }
  for (size_t id = 0; id < vocab.size(); ++id) EXPECT_EQ(seen[id], 1) << id;
  EXPECT_EQ(trie.max_depth(), 6u);  // two three-byte characters
}

}  // namespace
}  // namespace ss
