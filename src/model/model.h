#pragma once
// A loaded model: immutable config, vocabulary and weight views (into mapped
// files or owned buffers, kept alive here).
#include <memory>
#include <string>
#include <vector>

#include "format/tensor.h"
#include "model/config.h"
#include "model/vocab.h"
#include "util/result.h"

namespace ss {

// Optional tensors are empty views; a bias or norm the file lacks is a
// choice of the architecture, not an error.
struct LayerWeights {
  TensorView attn_norm, attn_norm_b;  // [dim]
  TensorView wq, wk, wv, wo;          // [q_dim x dim], [kv_dim x dim], [kv_dim x dim], [dim x q_dim]
  TensorView bq, bk, bv, bo;          // optional biases
  TensorView q_norm, k_norm;          // [head_dim], qk_norm only
  TensorView post_attn_norm;          // [dim], post_norms only
  TensorView sinks;                   // [n_heads] learned sink logits, learned_sinks only
  TensorView ffn_norm, ffn_norm_b;    // [dim] (empty for ParallelSharedNorm)
  TensorView w_gate, w_up;            // [hidden x dim] (no gate for GeluMlp)
  TensorView w_down;                  // [dim x hidden]
  TensorView b_gate, b_up, b_down;    // optional biases
  TensorView post_ffn_norm;           // [dim], post_norms only
  // MoE: router [n_experts x dim] (+ bias), then per expert the FFN above.
  TensorView router, router_b;
  std::vector<TensorView> exp_gate, exp_up, exp_down;        // [n_experts] views
  std::vector<TensorView> exp_gate_b, exp_up_b, exp_down_b;  // [n_experts] rows
};

struct Model {
  ModelConfig config;
  Vocab vocab;
  TensorView tok_embd;     // [n_vocab x dim]
  TensorView output_norm;  // [dim]
  TensorView output_norm_b;
  TensorView output;    // [n_vocab x dim]
  TensorView output_b;  // [n_vocab], optional
  std::vector<LayerWeights> layers;
  std::string source;  // path it was loaded from
  std::vector<std::shared_ptr<const void>> keep_alive;
  // The matrices the int8 kernels read have been copied into their kernel
  // layouts in huge pages (runtime/kernel_layouts.h); done once per model.
  bool kernel_layouts = false;
};

struct ModelLoadOptions {
  std::string path;            // .gguf, llama2.c .bin, or an HF model directory
  std::string tokenizer_path;  // llama2.c tokenizer.bin (optional: looked up beside the model)
};

// Detects the format from the path and loads model and tokenizer vocabulary.
Result<std::shared_ptr<const Model>> load_model(const ModelLoadOptions& opts);

// Per-format loaders (used by load_model and by tests).
Result<std::shared_ptr<Model>> load_gguf_model(const std::string& path);
Result<std::shared_ptr<Model>> load_llama2c_model(const std::string& path, const std::string& tokenizer_path);
Result<std::shared_ptr<Model>> load_hf_model(const std::string& dir);
// True when path is a regular file that starts with the GGUF magic.
bool is_gguf_file(const std::string& path);
// A GGUF file's tokenizer alone, for any architecture and for llama.cpp's
// vocab-only files (no tensors needed).
Result<Vocab> load_gguf_vocab_file(const std::string& path);
// A llama2.c tokenizer.bin on its own (vocab_size -1: all entries in the file).
Result<Vocab> load_llama2c_vocab(const std::string& path, int32_t vocab_size);
// An HF tokenizer.json into v; ids must lie below n_vocab (the model's vocabulary size).
Status load_tokenizer_json(const std::string& path, int32_t n_vocab, Vocab& v);

// Checks that every tensor has the shape the config implies.
Status validate_model(const Model& m);

}  // namespace ss
