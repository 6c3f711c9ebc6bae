#pragma once
#include <cmath>
#include <cstdint>

namespace ss {

// out[i] = silu(gate[i]) * up[i]  (SwiGLU); out may be gate or up. 16
// lanes at a time with a polynomial exp (ops/fast_exp.h).
void swiglu(const float* gate, const float* up, int n, float* out);
// Scalar twin: libm's exp.
void swiglu_scalar(const float* gate, const float* up, int n, float* out);

// GELU, tanh approximation: x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))),
// computed as x * sigmoid(2 sqrt(2/pi) (x + 0.044715 x^3)) with the
// polynomial exp, 16 lanes at a time. (llama.cpp's CPU backend reads it
// from an fp16 table instead; the golden files carry both.) In place.
void gelu_tanh(float* x, int n);
// out[i] = gelu(gate[i]) * up[i] (GeGLU); out may be gate or up.
void geglu(const float* gate, const float* up, int n, float* out);
// Scalar twins: the formula above with libm's tanh.
void gelu_tanh_scalar(float* x, int n);
void geglu_scalar(const float* gate, const float* up, int n, float* out);
// gpt-oss's clamped SwiGLU: g = min(gate, limit), u = clamp(up, -limit,
// limit), out = g * sigmoid(alpha g) * (u + 1); out may be gate or up.
void swiglu_oai(const float* gate, const float* up, int n, float alpha, float limit, float* out);

// -log softmax(logits)[target], computed in double for stable scoring.
inline double nll_of(const float* logits, int n, int target) {
  double mx = logits[0];
  for (int i = 1; i < n; ++i) mx = logits[i] > mx ? logits[i] : mx;
  double sum = 0;
  for (int i = 0; i < n; ++i) sum += std::exp(static_cast<double>(logits[i]) - mx);
  return -(static_cast<double>(logits[target]) - mx - std::log(sum));
}

}  // namespace ss
