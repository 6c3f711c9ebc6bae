#pragma once
// Rotary position embedding. Angles are computed in double from an integer
// position, so a position of 10^7 or more is as exact as position 5.
#include <cstdint>
#include <vector>

namespace ss {

// Interleaved: RoPE rotates pairs (2i, 2i+1) (Meta/llama2.c/GGUF llama layout).
// Neox: pairs (i, i + d/2) (Hugging Face rotate-half layout).
enum class RopeStyle { Interleaved, Neox };

// Position scaling as ggml's rope_yarn applies it. freq_scale < 1 with
// ext_factor 0 is linear interpolation (positions * freq_scale); ext_factor
// > 0 is YaRN: dims between the beta_fast and beta_slow correction dims
// blend interpolated and original frequencies, and cos/sin are multiplied by
// attn_factor * (1 + 0.1 ln(1 / freq_scale)).
struct RopeScaling {
  double freq_scale = 1.0;
  double ext_factor = 0.0;
  double attn_factor = 1.0;
  double beta_fast = 32.0;
  double beta_slow = 1.0;
  int64_t orig_ctx = 0;
};

class RopeTable {
 public:
  RopeTable(int rope_dim, double base, const RopeScaling& scaling = {});
  int pairs() const { return static_cast<int>(freq_.size()); }
  // cos/sin of pos * freq[i] for each pair i (each array pairs() long),
  // times the YaRN magnitude scale.
  void angles(int64_t pos, float* cos_out, float* sin_out) const;

 private:
  std::vector<double> freq_;
  double mscale_ = 1.0;
};

// Rotates n_heads heads of head_dim floats in place; only the first
// 2*pairs dims of each head are rotated.
void rope_apply(float* x, int n_heads, int head_dim, int pairs, const float* cos_v, const float* sin_v,
                RopeStyle style);

}  // namespace ss
