#pragma once
// Model hyper-parameters and architecture choices, read once from the model
// file into plain data; immutable afterwards. An architecture is nothing but
// a set of these choices: the runtime reads them and never looks at
// arch_name, so a new family is a loader change, not an engine change.
#include <cstdint>
#include <string>
#include <vector>

namespace ss {

// RMSNorm: x / rms(x) * w. LayerNorm: (x - mean) / std(x) * w (+ b where
// the file has a bias tensor).
enum class NormKind { Rms, Layer };

// SwiGlu: down(silu(gate h) * up h). GeGlu: down(gelu(gate h) * up h).
// GeluMlp: down(gelu(up h + b)) (no gate). MoeSwigluOai: a router picks
// the top-k experts, softmax over those k logits weighs them; each expert is
// gpt-oss's clamped swiglu (alpha 1.702, limit 7) with biases.
enum class FfnKind { SwiGlu, GeGlu, GeluMlp, MoeSwigluOai };

// Sequential: x += attn(n1 x); x += ffn(n2 x). Parallel (GPT-NeoX):
// x += attn(n1 x) + ffn(n2 x). ParallelSharedNorm (Phi-2): h = n1 x;
// x += attn(h) + ffn(h).
enum class ResidualKind { Sequential, Parallel, ParallelSharedNorm };

// Rope: rotary embedding on `dim` dims of each head. Alibi: no rotation; a
// per-head linear bias on the query-key distance (MPT).
enum class PositionKind { Rope, Alibi };

struct RotaryConfig {
  int dim = 0;        // rotated dims per head (<= head_dim); the rest pass through
  bool neox = false;  // pairs (i, i + dim/2) (HF rotate-half); else (2i, 2i+1)
  double base = 10000.0;
  double freq_scale = 1.0;  // linear position scaling (Gemma 3 global layers: 1/8)
  // YaRN (on when yarn_ext_factor > 0): ggml's rope_yarn with these values.
  double yarn_ext_factor = 0.0;
  double yarn_attn_factor = 1.0;
  double yarn_beta_fast = 32.0;
  double yarn_beta_slow = 1.0;
  int64_t yarn_orig_ctx = 0;
};

// What one layer's attention is: full (sees the cache policy's keys) or
// sliding (sees its own `sliding_window` most recent keys, itself included),
// and which rotary it uses.
struct LayerAttention {
  int sliding_window = 0;  // 0: full attention
  int rotary = 0;          // index into ModelConfig::rotaries
};

struct ModelConfig {
  std::string arch_name;
  int n_vocab = 0;
  int dim = 0;
  int n_layers = 0;
  int n_heads = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  int hidden_dim = 0;  // FFN width (per expert for MoE)
  int64_t trained_context = 0;

  NormKind norm = NormKind::Rms;
  float norm_eps = 1e-5f;
  FfnKind ffn = FfnKind::SwiGlu;
  ResidualKind residual = ResidualKind::Sequential;
  bool qk_norm = false;          // per-head RMSNorm of q and k before rotary (Qwen3, Gemma 3)
  bool post_norms = false;       // RMSNorm of the attention and FFN outputs before the residual (Gemma 3)
  float embedding_scale = 1.0f;  // x = embedding * scale (Gemma: sqrt(dim))
  float attn_scale = 0.0f;       // query-key scale; 0: 1/sqrt(head_dim)
  float clamp_kqv = 0.0f;        // q, k, v clamped to [-c, c] when > 0 (MPT's clamp_qkv)
  float attn_softcap = 0.0f;     // scores -> cap * tanh(score / cap) when > 0 (Gemma 2)
  float final_softcap = 0.0f;    // logits -> cap * tanh(logit / cap) when > 0 (Gemma 2)

  PositionKind positions = PositionKind::Rope;
  float alibi_max_bias = 8.0f;
  std::vector<RotaryConfig> rotaries;           // at least one when positions == Rope
  std::vector<LayerAttention> layer_attention;  // [n_layers]
  bool learned_sinks = false;                   // per-head sink logit in the softmax denominator (gpt-oss)

  int n_experts = 0;  // MoE only
  int n_experts_used = 0;
  float oai_swiglu_alpha = 1.702f;
  float oai_swiglu_limit = 7.0f;

  bool tied_output = false;

  int q_dim() const { return n_heads * head_dim; }
  int kv_dim() const { return n_kv_heads * head_dim; }
  float attention_scale() const;
  bool sliding(int layer) const { return layer_attention[static_cast<size_t>(layer)].sliding_window > 0; }
  // The sliding layers' window (one size per model), 0 when none slides.
  int sliding_window() const;
  int full_layers() const;
  const RotaryConfig& rotary(int layer) const {
    return rotaries[static_cast<size_t>(layer_attention[static_cast<size_t>(layer)].rotary)];
  }
  // All layers full attention with rotary 0 (the Llama family's layout).
  void uniform_layers();
};

const char* supported_architectures();

}  // namespace ss
