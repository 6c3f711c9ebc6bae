#include "model/vocab.h"

#include <gtest/gtest.h>

namespace ss {
namespace {

Vocab vocab_of(std::vector<std::string> pieces) {
  Vocab v;
  v.pieces = std::move(pieces);
  v.types.assign(v.pieces.size(), TokenType::Normal);
  return v;
}

TEST(VocabEog, EosEotAndExtraIdsEndGeneration) {
  Vocab v = vocab_of({"a", "b", "c", "d", "e"});
  v.eos = 1;
  v.eot = 3;
  v.eog_extra = {4, 99, -7};  // ids outside the vocab are ignored
  v.finalize();
  EXPECT_EQ(v.eog_ids(), (std::vector<int32_t>{1, 3, 4}));
  EXPECT_FALSE(v.is_eog(0));
  EXPECT_FALSE(v.is_eog(-1));
  EXPECT_FALSE(v.is_eog(5));
  EXPECT_FALSE(v.is_eog(1 << 30));
}

// A Gemma or Qwen file states eos = <eos> / <|endoftext|>; its chat turns end
// with <end_of_turn> / <|im_end|>, which llama.cpp stops at by their text and
// treats as control tokens even where the file typed them normal.
TEST(VocabEog, EndOfTurnTextsEndGenerationAndBecomeControl) {
  Vocab v = vocab_of({"<eos>", "<end_of_turn>", "<|im_end|>", "<|eot_id|>", "hello", "<start_of_turn>"});
  v.eos = 0;
  v.finalize();
  EXPECT_EQ(v.eog_ids(), (std::vector<int32_t>{0, 1, 2, 3}));
  EXPECT_EQ(v.types[1], TokenType::Control);
  EXPECT_EQ(v.types[2], TokenType::Control);
  EXPECT_EQ(v.types[4], TokenType::Normal);
  EXPECT_EQ(v.types[5], TokenType::Normal);  // a turn's start is not its end
}

// gpt-oss: <|end|> closes the analysis channel and the answer goes on; only
// <|return|> and <|call|> end it. Its channel markers are shown as text.
TEST(VocabEog, HarmonyEndIsNotTheEndWhereReturnAndCallAre) {
  Vocab v = vocab_of({"<|start|>", "<|channel|>", "<|message|>", "<|end|>", "<|return|>", "<|call|>", "<|constrain|>"});
  for (auto& t : v.types) t = TokenType::Control;
  v.eos = 4;
  v.finalize();
  EXPECT_EQ(v.eog_ids(), (std::vector<int32_t>{4, 5}));
  for (int id : {0, 1, 2, 3, 6}) EXPECT_EQ(v.types[static_cast<size_t>(id)], TokenType::UserDefined) << id;

  // Phi-3 has <|end|> but neither <|return|> nor <|call|>: there it ends the turn.
  Vocab phi = vocab_of({"<|user|>", "<|assistant|>", "<|end|>", "<|endoftext|>"});
  phi.eos = 3;
  phi.finalize();
  EXPECT_EQ(phi.eog_ids(), (std::vector<int32_t>{2, 3}));
}

// A Harmony conversation continues with <|end|> where the model wrote
// <|return|>; other vocabularies feed back what was sampled.
TEST(VocabEog, HarmonyReturnIsFedBackAsEnd) {
  Vocab v = vocab_of({"<|start|>", "<|channel|>", "<|message|>", "<|end|>", "<|return|>", "<|call|>", "x"});
  v.finalize();
  EXPECT_EQ(v.as_context(4), 3);
  EXPECT_EQ(v.as_context(5), 5);
  EXPECT_EQ(v.as_context(6), 6);
  Vocab plain = vocab_of({"<|end|>", "<|return|>", "x"});  // no Harmony channels
  plain.finalize();
  EXPECT_EQ(plain.as_context(1), 1);
}

TEST(VocabEog, FinalizeTwiceGivesTheSameSet) {
  Vocab v = vocab_of({"<|end|>", "<|return|>", "<|call|>", "x"});
  v.finalize();
  const auto first = v.eog_ids();
  v.finalize();
  EXPECT_EQ(v.eog_ids(), first);
  EXPECT_EQ(first, (std::vector<int32_t>{1, 2}));
}

}  // namespace
}  // namespace ss
