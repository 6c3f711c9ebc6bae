#pragma once
// Which type each tensor of a model gets when it is quantized: llama.cpp's
// rules (src/llama-quant.cpp) for the types sinkstream reads, so a file we
// write is laid out as `llama-quantize` would lay it out:
// - only 2-D+ "*.weight" tensors are quantized (norms, biases, MoE routers
//   and learned sinks stay as they are);
// - the output matrix (or the token embedding when it doubles as the output)
//   takes Q6_K, or Q8_0 for a Q8_0 file or rows that K-quants cannot hold;
// - Q4_K_M / Q5_K_M: attn_v and ffn_down take Q6_K in the first and last
//   eighth of the layers and every third layer between, a fused attn_qkv
//   takes Q5_K / Q6_K; Q4_K_S: attn_v of layers 0-3 and ffn_down of the first
//   eighth take Q5_K;
// - rows that do not fit a type's block fall back as llama.cpp falls back
//   (Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0), and to F16 when even that
//   does not fit (llama.cpp refuses Q4_0/Q8_0 there; we fall back too).
#include <cstdint>
#include <string>
#include <vector>

#include "format/ggml_types.h"
#include "util/result.h"

namespace ss {

enum class QuantMix { None, KS, KM };

struct QuantTarget {
  std::string name;  // as the user typed it, lower case: "q4_k_m"
  GgmlType base;     // the type most tensors get
  QuantMix mix = QuantMix::None;
  bool pure = false;       // --pure: no mixes, no output rule (fallbacks still apply)
  uint32_t file_type = 0;  // llama.cpp's general.file_type (LLAMA_FTYPE_*)
};

// f32 f16 bf16 q8_0 q4_0 q5_0 q5_1 q6_k q4_k_s q4_k_m q5_k_s q5_k_m, and
// llama.cpp's aliases q4_k (= q4_k_m) and q5_k (= q5_k_m); any case.
Result<QuantTarget> parse_quant_target(const std::string& name);
std::string quant_target_names();

// What the model says about a tensor beyond its name and shape.
struct QuantModelInfo {
  int n_layers = 0;
  int n_experts = 0;
  bool has_output = true;  // false: token_embd doubles as the output
};

struct QuantChoice {
  GgmlType type;
  std::string note;  // why it differs from the target's base type ("" if it does not)
};

// The type for tensor `name` with dims ne (ne[0] = row length) whose stored
// type is `from` (kept as is for tensors that are not quantized).
QuantChoice choose_quant_type(const QuantTarget& t, const QuantModelInfo& m, const std::string& name,
                              const std::vector<int64_t>& ne, GgmlType from);

}  // namespace ss
