#include "ops/activations.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "ops/clones.h"
#include "ops/fast_exp.h"
#include "ops/lanes.h"

namespace ss {

namespace {
// silu(g) * u = g * u / (1 + exp(-g)); for g below -88 exp is clamped and
// the quotient is ~0 with g's sign, as libm's inf gives.
template <class F>
__attribute__((always_inline)) inline F swiglu_one(F g, F u) {
  return g * u / (1.0f + fast_exp::exp_clamped(F{} - g));
}

SS_CLONE_IMPL void swiglu_impl(const float* gate, const float* up, int n, float* out) {
  int i = 0;
  for (; i + 16 <= n; i += 16) {
    Lanes g, u;
    std::memcpy(&g, gate + i, sizeof g);
    std::memcpy(&u, up + i, sizeof u);
    const Lanes r = swiglu_one(g, u);
    std::memcpy(out + i, &r, sizeof r);
  }
  for (; i < n; ++i) out[i] = swiglu_one(gate[i], up[i]);
}
}  // namespace

SS_CLONED(void, swiglu, (const float* gate, const float* up, int n, float* out), (gate, up, n, out))

void swiglu_scalar(const float* gate, const float* up, int n, float* out) {
  for (int i = 0; i < n; ++i) {
    const float g = gate[i];
    out[i] = g * (1.0f / (1.0f + std::exp(-g))) * up[i];
  }
}

namespace {
inline float gelu_one(float x) {
  constexpr float kSqrt2OverPi = 0.79788456080286535587989211986876f, kA = 0.044715f;
  return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * x * (1.0f + kA * x * x)));
}
}  // namespace

void gelu_tanh(float* x, int n) {
  for (int i = 0; i < n; ++i) x[i] = gelu_one(x[i]);
}

void geglu(const float* gate, const float* up, int n, float* out) {
  for (int i = 0; i < n; ++i) out[i] = gelu_one(gate[i]) * up[i];
}

void swiglu_oai(const float* gate, const float* up, int n, float alpha, float limit, float* out) {
  for (int i = 0; i < n; ++i) {
    const float g = std::min(gate[i], limit);
    const float u = std::clamp(up[i], -limit, limit);
    out[i] = g / (1.0f + std::exp(-alpha * g)) * (u + 1.0f);
  }
}

}  // namespace ss
