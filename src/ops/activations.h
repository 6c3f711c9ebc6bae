#pragma once
#include <cmath>
#include <cstdint>

namespace ss {

// out[i] = silu(gate[i]) * up[i]  (SwiGLU); out may be gate or up. 16
// lanes at a time with a polynomial exp (ops/fast_exp.h).
void swiglu(const float* gate, const float* up, int n, float* out);
// Scalar twin: libm's exp.
void swiglu_scalar(const float* gate, const float* up, int n, float* out);

// -log softmax(logits)[target], computed in double for stable scoring.
inline double nll_of(const float* logits, int n, int target) {
  double mx = logits[0];
  for (int i = 1; i < n; ++i) mx = logits[i] > mx ? logits[i] : mx;
  double sum = 0;
  for (int i = 0; i < n; ++i) sum += std::exp(static_cast<double>(logits[i]) - mx);
  return -(static_cast<double>(logits[target]) - mx - std::log(sum));
}

}  // namespace ss
