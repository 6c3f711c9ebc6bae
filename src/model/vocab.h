#pragma once
// Tokenizer vocabulary as loaded from a model file (GGUF, tokenizer.json,
// llama2.c tokenizer.bin). Pieces of SentencePiece-style vocabularies use
// U+2581 for spaces; byte-level vocabularies use GPT-2's byte-to-unicode map.
#include <cstdint>
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

enum class PreTokenizer { None, Gpt2, Llama3, Qwen2 };

enum class TokenType : uint8_t { Normal = 1, Unknown = 2, Control = 3, UserDefined = 4, Unused = 5, Byte = 6 };

struct Vocab {
  VocabKind kind = VocabKind::Spm;
  PreTokenizer pre = PreTokenizer::None;
  std::vector<std::string> pieces;
  std::vector<float> scores;
  std::vector<TokenType> types;
  std::vector<std::pair<std::string, std::string>> merges;  // RankBpe / ByteLevel, by rank
  int32_t bos = -1, eos = -1, unk = -1, eot = -1;
  bool add_bos = true;
  bool add_space_prefix = true;  // SPM / RankBpe: prepend U+2581
  bool fuse_unk = false;
  bool ignore_merges = false;  // ByteLevel: a word that is a token is not split (Llama-3)
  std::string chat_template;

  int32_t size() const { return static_cast<int32_t>(pieces.size()); }
  void finalize();  // builds lookup tables; call after filling
  int32_t find(const std::string& piece) const {
    auto it = index_.find(piece);
    return it == index_.end() ? -1 : it->second;
  }
  // Byte token <0xHH> id or -1.
  int32_t byte_token(uint8_t b) const { return byte_ids_[b]; }
  bool is_eog(int32_t id) const { return id == eos || (eot >= 0 && id == eot); }

 private:
  std::unordered_map<std::string, int32_t> index_;
  int32_t byte_ids_[256];
};

}  // namespace ss
