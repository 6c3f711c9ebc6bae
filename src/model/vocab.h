#pragma once
// Tokenizer vocabulary as loaded from a model file (GGUF, tokenizer.json,
// llama2.c tokenizer.bin). Pieces of SentencePiece-style vocabularies use
// U+2581 for spaces; byte-level vocabularies use GPT-2's byte-to-unicode map.
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace ss {

enum class VocabKind {
  Spm,        // SentencePiece BPE: score-ordered merges, byte fallback
  RankBpe,    // HF BPE over metaspace-normalised text: rank-ordered merges
  ByteLevel,  // GPT-2 byte-level BPE with a pre-tokenizer regex
};

// Byte-level BPE pre-tokenizers, named after llama.cpp's pre-tokenizer types.
enum class PreTokenizer {
  None,
  Gpt2,            // GPT-2's regex (gpt-2, mpt, olmo, phi-2, ...)
  Llama3,          // Llama 3: case-insensitive contractions, digits in threes
  Qwen2,           // Llama 3's with single digits (qwen2, stablelm2, ...)
  Gpt4o,           // o200k: words split at case changes, digits in threes (gpt-oss, llama4)
  Tekken,          // Mistral's tekken: o200k's words without contractions, single digits
  DigitsThenGpt2,  // every digit alone, then GPT-2's regex (starcoder, refact, smollm, command-r)
  SeedCoder,       // Llama 3's with single digits, no line breaks after punctuation
  DeepseekCoder,   // line breaks, words, punctuation, CJK runs, digits: one split after another
  Default          // llama.cpp's "default" BPE: punctuation runs, GPT-2, numbers, digit triples
};

// The PreTokenizer for a GGUF tokenizer.ggml.pre name; nullopt when this
// engine does not implement that name's splitting.
std::optional<PreTokenizer> pre_tokenizer_from_name(const std::string& name);
// A name llama.cpp reads as that PreTokenizer (for writing GGUF files).
const char* pre_tokenizer_name(PreTokenizer p);

enum class TokenType : uint8_t { Normal = 1, Unknown = 2, Control = 3, UserDefined = 4, Unused = 5, Byte = 6 };

struct Vocab {
  VocabKind kind = VocabKind::Spm;
  PreTokenizer pre = PreTokenizer::None;
  std::vector<std::string> pieces;
  std::vector<float> scores;
  std::vector<TokenType> types;
  std::vector<std::pair<std::string, std::string>> merges;  // RankBpe / ByteLevel, by rank
  int32_t bos = -1, eos = -1, unk = -1, eot = -1;
  // More ids that end generation, from the file: eom and FIM pad/rep/sep
  // (GGUF), the rest of an HF eos_token_id list.
  std::vector<int32_t> eog_extra;
  bool add_bos = true;
  bool add_space_prefix = true;  // SPM / RankBpe: prepend U+2581
  bool fuse_unk = false;
  bool ignore_merges = false;  // ByteLevel: a word that is a token is not split (Llama-3)
  std::string chat_template;

  int32_t size() const { return static_cast<int32_t>(pieces.size()); }
  // Builds lookup tables and the end-of-generation set; call after filling.
  // Token types are adjusted as llama.cpp's vocab loader does (end-of-turn
  // texts become Control, gpt-oss's channel markers UserDefined), so that
  // tokenizing and detokenizing treat them the same way it does.
  void finalize();
  int32_t find(const std::string& piece) const {
    auto it = index_.find(piece);
    return it == index_.end() ? -1 : it->second;
  }
  // Byte token <0xHH> id or -1.
  int32_t byte_token(uint8_t b) const { return byte_ids_[b]; }
  // End of generation: eos, eot, eog_extra and the tokens llama.cpp marks by
  // their text (<|eot_id|>, <|im_end|>, <end_of_turn>, <|return|>, ...).
  bool is_eog(int32_t id) const { return id >= 0 && static_cast<size_t>(id) < eog_.size() && eog_[id] != 0; }
  std::vector<int32_t> eog_ids() const;
  // The token to feed for a sampled `id` that is fed back as context (a chat
  // continuing after a reply): Harmony's <|return|> ends a final answer but
  // "should never be an input to the model"; a conversation shows <|end|>.
  int32_t as_context(int32_t id) const { return id >= 0 && id == harmony_return_ ? harmony_end_ : id; }

 private:
  std::unordered_map<std::string, int32_t> index_;
  int32_t byte_ids_[256];
  std::vector<uint8_t> eog_;  // [size()]
  int32_t harmony_return_ = -1, harmony_end_ = -1;
};

}  // namespace ss
