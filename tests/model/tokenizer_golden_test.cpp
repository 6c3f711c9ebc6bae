// Tokenizers against reference token ids: SentencePiece (stories260K golden
// tokens from tok512.model), llama.cpp's Llama-2 SPM vectors, and HF BPE.
#include <gtest/gtest.h>

#include <sstream>

#include "ggml_vocab_vectors.h"
#include "model/model.h"
#include "model/story_text.h"
#include "model/tokenizer.h"
#include "test_paths.h"

namespace ss {
namespace {

std::shared_ptr<const Model> load(const std::string& path, const std::string& tok = "") {
  auto m = load_model({path, tok});
  EXPECT_TRUE(m.ok()) << (m.ok() ? "" : m.error().message);
  return m.ok() ? m.value() : nullptr;
}

TEST(TokenizerGolden, Stories260KEncodesValidationTextLikeSentencePiece) {
  const auto golden = test::read_ids(test::shared("golden/stories260K/tokens.txt"));
  ASSERT_FALSE(golden.empty());  // however many the golden holds (2048 here)
  const auto text = join_stories(test::read_file(test::shared("data/tinystories-valid-dev.txt")));
  for (const std::string path : {"models/stories260K/stories260K.gguf", "models/stories260K/stories260K.bin"}) {
    auto m = load(test::shared(path));
    ASSERT_TRUE(m);
    const Tokenizer tok(m->vocab);
    const auto ids = tok.encode(text, true);
    ASSERT_GE(ids.size(), golden.size()) << path;
    EXPECT_EQ(std::vector<int32_t>(ids.begin(), ids.begin() + golden.size()), golden) << path;
  }
}

// The 656K golden ids were made by HF tokenizers story by story: BOS, then
// encode(story + "\n") for each story (so each story gets its own "▁" prefix).
TEST(TokenizerGolden, TinyStories656KEncodesValidationTextStoryByStory) {
  const auto golden = test::read_ids(test::shared("golden/tinystories-656k/tokens.txt"));
  auto m = load(test::shared("models/tinystories-656k"));
  ASSERT_TRUE(m);
  const Tokenizer tok(m->vocab);
  std::vector<int32_t> ids = {m->vocab.bos};
  // Split the raw text into stories the same way join_stories does.
  const std::string raw = test::read_file(test::shared("data/tinystories-valid-dev.txt"));
  size_t start = 0;
  for (;;) {
    const size_t p = raw.find("<|endoftext|>", start);
    if (p == std::string::npos || ids.size() >= golden.size()) break;
    const std::string piece = raw.substr(start, p - start);
    start = p + 13;
    const auto b = piece.find_first_not_of(" \t\r\n");
    if (b == std::string::npos) continue;
    const auto e = piece.find_last_not_of(" \t\r\n");
    const auto v = tok.encode(piece.substr(b, e - b + 1) + "\n", false);
    ids.insert(ids.end(), v.begin(), v.end());
  }
  ASSERT_GE(ids.size(), golden.size());
  EXPECT_EQ(std::vector<int32_t>(ids.begin(), ids.begin() + golden.size()), golden);
}

// Special-token texts in a prompt (chat templates, pasted text), as
// llama.cpp's llama_tokenize (add_special, parse_special) gives them for the
// stories260K GGUF: ids from llama.cpp d32676d77, built outside this repo
// (its SPM tokenizer is b8183's). <s> </s> <unk> become their tokens; the
// text after each gets SentencePiece's space prefix.
TEST(TokenizerGolden, SpecialTextsAsLlamaCpp) {
  auto m = load(test::shared("models/stories260K/stories260K.gguf"));
  ASSERT_TRUE(m);
  const Tokenizer tok(m->vocab);
  const std::pair<std::string, std::vector<int32_t>> cases[] = {
      {"<s>Once upon a time</s> there was<unk>a cat", {1, 1, 403, 407, 261, 378, 2, 410, 383, 286, 0, 261, 280, 294}},
      {"Lily said: \"</s></s>  hi<s>\\n<unk><unk>\"",
       {1, 317, 336, 467, 313, 2, 2, 410, 410, 270, 417, 1, 410, 500, 416, 0, 0, 313}},
      {" <s> x </s>", {1, 410, 410, 1, 410, 410, 444, 410, 2}},
  };
  for (const auto& [text, want] : cases) EXPECT_EQ(tok.encode(text, true, true), want) << text;
}

// llama.cpp's test vectors: cases separated by "\n__ggml_vocab_test__\n"; the
// .out file has one line of ids per case (no BOS).
TEST(TokenizerGolden, Llama2MatchesLlamaCppVectors) {
  const std::string dir = test::shared("models/llama2-tokenizer/");
  auto lv = load_llama2c_vocab(dir + "tokenizer.bin", -1);
  ASSERT_TRUE(lv.ok()) << lv.error().message;
  const Tokenizer tok(lv.value());
  const auto vv =
      test::read_vocab_vectors(dir + "ggml-vocab-llama-spm.gguf.inp", dir + "ggml-vocab-llama-spm.gguf.out");
  const auto& cases = vv.cases;
  const auto& expected = vv.ids;
  ASSERT_FALSE(cases.empty());  // every case the files hold (46 here)
  ASSERT_EQ(expected.size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    EXPECT_EQ(tok.encode(cases[i], false), expected[i]) << "case " << i << ": '" << cases[i] << "'";
    // Decoding the ids gives the text back (SentencePiece strips the dummy prefix).
    if (!cases[i].empty() && cases[i][0] != ' ') {
      EXPECT_EQ(tok.decode(expected[i]), cases[i]) << "case " << i;
    }
  }
}

}  // namespace
}  // namespace ss
