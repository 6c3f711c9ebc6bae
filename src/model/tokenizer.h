#pragma once
// Text <-> token ids for the three vocabulary kinds, plus a streaming
// detokenizer that never emits half a UTF-8 character.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "model/vocab.h"
#include "util/utf8.h"

namespace ss {

class Tokenizer {
 public:
  explicit Tokenizer(const Vocab& vocab);

  // Encodes text; adds BOS first when add_bos and the vocab has one.
  // User-defined token texts in the text always become those tokens; with
  // parse_special, control and unknown ones too (e.g. "<|im_start|>",
  // "<s>": chat templates); otherwise they are plain text. As llama.cpp.
  std::vector<int32_t> encode(std::string_view text, bool add_bos, bool parse_special = false) const;
  // Raw bytes of one token (control tokens give ""; byte tokens their byte).
  std::string token_bytes(int32_t id) const;
  // The token's bytes as a generated answer shows them: the first token
  // with text loses SentencePiece's word-start space, which is not text.
  std::string answer_bytes(int32_t id, bool first) const;
  // Whole-sequence decode (leading space after BOS stripped, like SentencePiece).
  std::string decode(const std::vector<int32_t>& ids) const;
  const Vocab& vocab() const { return vocab_; }

 private:
  std::vector<int32_t> encode_fragment(std::string_view text, bool at_start) const;
  std::vector<int32_t> encode_spm_like(std::string_view text, bool at_start) const;
  std::vector<int32_t> encode_byte_level(std::string_view text) const;
  void rank_merge_word(const std::string& word, std::vector<int32_t>& out) const;
  int32_t merge_rank(const std::string& a, const std::string& b) const;

  const Vocab& vocab_;
  std::unordered_map<std::string, int32_t> merge_ranks_;  // "a\0b" -> rank
  std::string byte_to_unicode_[256];
  std::vector<int32_t> specials_;  // control/user-defined/unknown ids, longest text first
  std::unordered_map<uint32_t, uint8_t> unicode_to_byte_;
};

// Turns a stream of generated ids into text: strips the space SentencePiece
// puts before the first word of a text, and holds back incomplete UTF-8.
// at_text_start false: the ids continue a text shown elsewhere (a completion
// of a prompt), so a first word's space is real and kept.
class Detokenizer {
 public:
  explicit Detokenizer(const Tokenizer& tok, bool at_text_start = true) : tok_(&tok), at_start_(at_text_start) {}
  std::string push(int32_t id);
  std::string flush() { return buf_.flush(); }

 private:
  const Tokenizer* tok_;
  Utf8StreamBuffer buf_;
  bool at_start_ = true;
};

// Splits text into pre-tokens as the GPT-2 / Llama-3 / Qwen2 regexes do.
std::vector<std::string> pretokenize(std::string_view text, PreTokenizer kind);
// The multi-regex pre-tokenizers (llama.cpp's "default" for BPE files,
// deepseek-coder, digits-first): each regex splits the pieces the previous
// one left.
std::vector<std::string> pretokenize_cascade(std::string_view text, PreTokenizer kind);

}  // namespace ss
