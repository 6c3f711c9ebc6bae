#pragma once
// llama2.c legacy (version 0) checkpoints and tokenizer.bin files.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "format/tensor.h"
#include "util/mapped_file.h"
#include "util/result.h"

namespace ss {

struct Llama2cHeader {
  int32_t dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len;
  bool shared_classifier;
};

struct Llama2cLayer {
  TensorView attn_norm, wq, wk, wv, wo, ffn_norm, w1, w2, w3;
};

struct Llama2cCheckpoint {
  Llama2cHeader header{};
  TensorView tok_embd, output_norm, output;
  std::vector<Llama2cLayer> layers;
  std::shared_ptr<MappedFile> file;
};

Result<Llama2cCheckpoint> load_llama2c_checkpoint(const std::string& path);
Result<Llama2cCheckpoint> parse_llama2c_checkpoint(std::shared_ptr<MappedFile> file);

struct Llama2cVocab {
  uint32_t max_token_length = 0;
  std::vector<std::string> pieces;
  std::vector<float> scores;
};

// vocab_size comes from the checkpoint (the file does not store it); -1 reads
// entries until the end of the file.
Result<Llama2cVocab> load_llama2c_tokenizer(const std::string& path, int32_t vocab_size);
Result<Llama2cVocab> parse_llama2c_tokenizer(std::span<const uint8_t> bytes, const std::string& path,
                                             int32_t vocab_size);

}  // namespace ss
