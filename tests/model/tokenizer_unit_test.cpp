#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "model/tokenizer.h"

namespace ss {
namespace {

// A tiny GPT-2 style byte-level vocab: bytes map to printable code points
// (space -> "Ġ"), merges by rank.
Vocab byte_level_vocab() {
  Vocab v;
  v.kind = VocabKind::ByteLevel;
  v.pre = PreTokenizer::Gpt2;
  v.add_bos = false;
  v.add_space_prefix = false;
  // All 256 byte symbols first, in GPT-2 map order is not needed: look up by text.
  std::vector<std::string> base;
  int extra = 0;
  for (int b = 0; b < 256; ++b) {
    uint32_t cp =
        ((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF)) ? b : 256 + extra++;
    std::string s;
    utf8_append(s, cp);
    v.pieces.push_back(s);
  }
  const std::string G = "\xC4\xA0";  // Ġ
  v.merges = {{"h", "e"}, {"l", "l"}, {"he", "ll"}, {"hell", "o"}, {G, "w"}, {G + "w", "o"}};
  for (const auto& m : v.merges) v.pieces.push_back(m.first + m.second);
  v.pieces.push_back("<|eot|>");
  v.types.assign(v.pieces.size(), TokenType::Normal);
  v.types.back() = TokenType::Control;
  v.eos = static_cast<int32_t>(v.pieces.size()) - 1;
  v.finalize();
  return v;
}

TEST(ByteLevelBpe, MergesByRankAndRoundTrips) {
  const Vocab v = byte_level_vocab();
  const Tokenizer tok(v);
  const auto ids = tok.encode("hello wow", false);
  // "hello" -> one token; " wow" -> "Ġwo" + "w"
  ASSERT_EQ(ids.size(), 3u);
  EXPECT_EQ(v.pieces[ids[0]], "hello");
  EXPECT_EQ(v.pieces[ids[1]], "\xC4\xA0wo");
  EXPECT_EQ(tok.decode(ids), "hello wow");
  // Arbitrary bytes survive encode/decode.
  const std::string weird = "caf\xC3\xA9 \xF0\x9F\xA6\x99\n\tx  y";
  EXPECT_EQ(tok.decode(tok.encode(weird, false)), weird);
  EXPECT_EQ(tok.token_bytes(v.eos), "");
}

// A small SentencePiece vocab with a space prefix and specials of every
// kind: control <s> </s>, unknown <unk>, user-defined "ab" and "bcd" (which
// overlap in "abcd").
Vocab spm_vocab_with_specials() {
  Vocab v;
  v.kind = VocabKind::Spm;
  v.add_space_prefix = true;
  const std::string sp = "\xE2\x96\x81";  // U+2581
  v.pieces = {"<unk>", "<s>", "</s>", "ab", "bcd", sp, "a", "b", "c", "d", "x", sp + "x", sp + "a"};
  v.types = {TokenType::Unknown, TokenType::Control, TokenType::Control, TokenType::UserDefined,
             TokenType::UserDefined};
  v.types.resize(v.pieces.size(), TokenType::Normal);
  v.scores.assign(v.pieces.size(), 0.0f);
  v.scores[11] = v.scores[12] = 1.0f;  // "▁x", "▁a" merge
  v.unk = 0;
  v.bos = 1;
  v.eos = 2;
  v.finalize();
  return v;
}

// llama.cpp's rules (llama-vocab.cpp: tokenizer_st_partition, the SPM
// tokenize): specials split the text longest first wherever they occur;
// user-defined ones always, control and unknown ones with parse_special; a
// space prefix goes before the first text and every text after a special.
TEST(SpecialTokens, SplitAsLlamaCppDoes) {
  const Vocab v = spm_vocab_with_specials();
  const Tokenizer tok(v);
  using Ids = std::vector<int32_t>;
  // Text after a special token gets the space prefix, as at the start.
  EXPECT_EQ(tok.encode("x</s>x", false, true), (Ids{11, 2, 11}));
  EXPECT_EQ(tok.encode("<s>x", false, true), (Ids{1, 11}));
  EXPECT_EQ(tok.encode("<s>x", true, true), (Ids{1, 1, 11}));
  // Without parse_special, control and unknown texts stay text...
  EXPECT_EQ(tok.encode("<unk>", false, true), (Ids{0}));
  EXPECT_NE(tok.encode("<unk>", false, false), (Ids{0}));
  const Ids plain = tok.encode("x<s>", false, false);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 1), 0);
  // ...but user-defined ones split it either way, longest first: "bcd"
  // claims "abcd" before "ab" is looked for.
  for (bool parse : {false, true}) {
    EXPECT_EQ(tok.encode("abcd", false, parse), (Ids{12, 4})) << parse;  // "▁a" [bcd]
    EXPECT_EQ(tok.encode("abx", false, parse), (Ids{3, 11})) << parse;   // [ab] "▁x"
  }
}

TEST(Pretokenize, Gpt2Pattern) {
  const auto p = pretokenize("Hello world's  123 foo!!", PreTokenizer::Gpt2);
  const std::vector<std::string> want = {"Hello", " world", "'s", " ", " 123", " foo", "!!"};
  EXPECT_EQ(p, want);
}

TEST(Pretokenize, Llama3SplitsDigitsInThrees) {
  const auto p = pretokenize("abc 12345\n\nx", PreTokenizer::Llama3);
  const std::vector<std::string> want = {"abc", " ", "123", "45", "\n\n", "x"};
  EXPECT_EQ(p, want);
}

// Expected splits are what Python's `regex` module gives for llama.cpp's
// (b8183) regex of each type; 3004 random texts per type agreed when written.
using Pieces = std::vector<std::string>;

TEST(Pretokenize, O200kSplitsWordsAtCaseChangesAndKeepsContractions) {
  EXPECT_EQ(pretokenize("Hello WORLD HelloWorld \xC3\x89"
                        "COLE don't DON'T iPhone 12345 a/b//\n",
                        PreTokenizer::Gpt4o),
            (Pieces{"Hello", " WORLD", " Hello", "World", " \xC3\x89", "COLE", " don't", " DON'T", " i", "Phone", " ",
                    "123", "45", " a", "/b", "//\n"}));
}

TEST(Pretokenize, TekkenHasNoContractionsAndSingleDigits) {
  EXPECT_EQ(pretokenize("HelloWorld don't 123", PreTokenizer::Tekken),
            (Pieces{"Hello", "World", " don", "'t", " ", "1", "2", "3"}));
}

TEST(Pretokenize, DigitsFirstThenGpt2) {
  EXPECT_EQ(pretokenize("ied 4 \xC2\xBD months x12", PreTokenizer::DigitsThenGpt2),
            (Pieces{"ied", " ", "4", " ", "\xC2\xBD", " months", " x", "1", "2"}));
}

// \p{N} is every Unicode number (Arabic-Indic three, one half, superscript
// two), not only 0-9; a C library's iswdigit knows only 0-9.
TEST(Pretokenize, NonAsciiNumbersAreNumbers) {
  EXPECT_EQ(pretokenize("yG\xD9\xA3 \xC2\xBDx", PreTokenizer::Qwen2), (Pieces{"yG", "\xD9\xA3", " ", "\xC2\xBD", "x"}));
  EXPECT_EQ(pretokenize("x \xC2\xBD\xC2\xB2y", PreTokenizer::Gpt2), (Pieces{"x", " \xC2\xBD\xC2\xB2", "y"}));
}

TEST(Pretokenize, SeedCoderKeepsLineBreaksApartFromPunctuation) {
  EXPECT_EQ(pretokenize("abc 12\n!!\n\nx", PreTokenizer::SeedCoder),
            (Pieces{"abc", " ", "1", "2", "\n", "!!", "\n\n", "x"}));
}

// The multi-regex splitters: each regex splits what the previous one left.
TEST(Pretokenize, CascadesSplitPieceByPiece) {
  EXPECT_EQ(pretokenize("Hello, world!! \xE4\xB8\xAD\xE6\x96\x87 x123\ny", PreTokenizer::DeepseekCoder),
            (Pieces{"Hello", ",", " world", "!!", " ", "\xE4\xB8\xAD\xE6\x96\x87", " x", "1", "2", "3", "\n", "y"}));
  EXPECT_EQ(pretokenize("Hello, world!! $5 12345 a+b", PreTokenizer::Default),
            (Pieces{"Hello", ",", " world", "!!", " ", "$", "5", " ", "123", "45", " a", "+", "b"}));
  EXPECT_TRUE(pretokenize("", PreTokenizer::Default).empty());
}

// Every splitter covers its text exactly once, in order, for any bytes
// (invalid UTF-8 included): the pieces concatenate back to the text.
TEST(Pretokenize, PiecesConcatenateToTheTextForAnyBytes) {
  std::mt19937 rng(7);
  const std::vector<std::string> atoms = {"a",
                                          "Z",
                                          "7",
                                          " ",
                                          "\n",
                                          "\r",
                                          "\t",
                                          "'s",
                                          "!",
                                          "$",
                                          "\xC2\xBD",
                                          "\xE4\xB8\xAD",
                                          "\xF0\x9F\x98\x80",
                                          "\xCC\x81",
                                          "\xC2\xA0",
                                          "\xFF",
                                          "\xC3",
                                          "\x80",
                                          "\xE2\x80"};
  for (int iter = 0; iter < 2000; ++iter) {
    std::string text;
    const int n = static_cast<int>(rng() % 24);
    for (int k = 0; k < n; ++k) text += atoms[rng() % atoms.size()];
    for (PreTokenizer p :
         {PreTokenizer::Gpt2, PreTokenizer::Llama3, PreTokenizer::Qwen2, PreTokenizer::Gpt4o, PreTokenizer::Tekken,
          PreTokenizer::DigitsThenGpt2, PreTokenizer::SeedCoder, PreTokenizer::DeepseekCoder, PreTokenizer::Default}) {
      std::string joined;
      for (const auto& piece : pretokenize(text, p)) {
        EXPECT_FALSE(piece.empty());
        joined += piece;
      }
      ASSERT_EQ(joined, text) << static_cast<int>(p);
    }
  }
}

TEST(Pretokenize, GgufNamesMapAsLlamaCppDoes) {
  EXPECT_EQ(pre_tokenizer_from_name("gpt-4o"), PreTokenizer::Gpt4o);
  EXPECT_EQ(pre_tokenizer_from_name("llama-bpe"), PreTokenizer::Llama3);
  EXPECT_EQ(pre_tokenizer_from_name("qwen2"), PreTokenizer::Qwen2);
  EXPECT_EQ(pre_tokenizer_from_name("mpt"), PreTokenizer::Gpt2);
  EXPECT_EQ(pre_tokenizer_from_name("smollm"), PreTokenizer::DigitsThenGpt2);
  EXPECT_EQ(pre_tokenizer_from_name("tekken"), PreTokenizer::Tekken);
  EXPECT_FALSE(pre_tokenizer_from_name("deepseek-llm").has_value());  // not implemented: an error, not a guess
  EXPECT_EQ(pre_tokenizer_from_name("default"), PreTokenizer::Default);
  for (PreTokenizer p :
       {PreTokenizer::Gpt2, PreTokenizer::Llama3, PreTokenizer::Qwen2, PreTokenizer::Gpt4o, PreTokenizer::Tekken,
        PreTokenizer::DigitsThenGpt2, PreTokenizer::SeedCoder, PreTokenizer::DeepseekCoder, PreTokenizer::Default})
    EXPECT_EQ(pre_tokenizer_from_name(pre_tokenizer_name(p)), p);
}

TEST(Detokenizer, NeverEmitsHalfACharacter) {
  Vocab v;
  v.kind = VocabKind::Spm;
  v.pieces = {"<unk>",
              "<s>",
              "</s>",
              "<0xE2>",
              "<0x82>",
              "<0xAC>",
              "\xE2\x96\x81"
              "a"};
  v.types = {TokenType::Unknown, TokenType::Control, TokenType::Control, TokenType::Byte,
             TokenType::Byte,    TokenType::Byte,    TokenType::Normal};
  v.unk = 0;
  v.bos = 1;
  v.eos = 2;
  v.finalize();
  const Tokenizer tok(v);
  Detokenizer d(tok);
  EXPECT_EQ(d.push(1), "");
  EXPECT_EQ(d.push(6), "a");  // leading space of the first piece stripped
  EXPECT_EQ(d.push(3), "");
  EXPECT_EQ(d.push(4), "");
  EXPECT_EQ(d.push(5), "\xE2\x82\xAC");
  EXPECT_EQ(d.push(6), " a");
  // Missing characters fall back to bytes; U+2581 (the dummy prefix) has no
  // byte tokens here, so it becomes <unk>.
  EXPECT_EQ(tok.encode("\xE2\x82\xAC", false), (std::vector<int32_t>{0, 3, 4, 5}));
}

}  // namespace
}  // namespace ss
