#pragma once
// Model hyper-parameters, read once from the model file; immutable afterwards.
#include <cstdint>
#include <string>

namespace ss {

enum class Arch { Llama, Mistral, Qwen2 };
// Interleaved: RoPE rotates pairs (2i, 2i+1) (Meta/llama2.c/GGUF llama layout).
// Neox: pairs (i, i + d/2) (Hugging Face rotate-half layout, GGUF qwen2).
enum class RopeStyle { Interleaved, Neox };

struct ModelConfig {
  std::string arch_name;
  Arch arch = Arch::Llama;
  int n_vocab = 0;
  int dim = 0;
  int n_layers = 0;
  int n_heads = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  int hidden_dim = 0;
  int rope_dim = 0;  // rotated dims per head (<= head_dim)
  int64_t trained_context = 0;
  float rope_base = 10000.0f;
  float rms_eps = 1e-5f;
  RopeStyle rope_style = RopeStyle::Interleaved;
  bool qkv_bias = false;
  bool tied_output = false;

  int q_dim() const { return n_heads * head_dim; }
  int kv_dim() const { return n_kv_heads * head_dim; }
};

const char* supported_architectures();

}  // namespace ss
