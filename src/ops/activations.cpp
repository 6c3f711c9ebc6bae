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

// out[i] = Op{}(gate[i], up[i]): 16 lanes at a time, then one by one. Op's
// operator() is an always-inline template (float and Lanes), so each clone
// compiles it at its own level (a lambda would be a separate, baseline
// function where an unoptimised build does not inline it).
template <class Op>
__attribute__((always_inline)) inline void by_lanes(const float* gate, const float* up, int n, float* out) {
  int i = 0;
  for (; i + 16 <= n; i += 16) {
    Lanes g, u;
    std::memcpy(&g, gate + i, sizeof g);
    std::memcpy(&u, up + i, sizeof u);
    const Lanes r = Op{}(g, u);
    std::memcpy(out + i, &r, sizeof r);
  }
  for (; i < n; ++i) out[i] = Op{}(gate[i], up[i]);
}

struct Swiglu {
  template <class F>
  __attribute__((always_inline)) F operator()(F g, F u) const {
    return swiglu_one(g, u);
  }
};

SS_CLONE_IMPL void swiglu_impl(const float* gate, const float* up, int n, float* out) {
  by_lanes<Swiglu>(gate, up, n, out);
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
constexpr float kSqrt2OverPi = 0.79788456080286535587989211986876f, kGeluA = 0.044715f;

inline float gelu_one(float x) { return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * x * (1.0f + kGeluA * x * x))); }

// The same function as x * sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x^3):
// 1 + tanh(u) = 2 / (1 + exp(-2u)), with no cancellation for negative x
// (where 1 + tanh(u) is small) and exp by the polynomial, so it vectorises.
// Far below 0, exp(-2u) is clamped and the result ~ -0 as libm's gives.
template <class F>
__attribute__((always_inline)) inline F gelu_fast(F x) {
  const F u2 = (2.0f * kSqrt2OverPi) * x * (1.0f + kGeluA * x * x);
  return x / (1.0f + fast_exp::exp_clamped(F{} - u2));
}

struct Gelu {  // of the gate alone (gelu_tanh passes x as both)
  template <class F>
  __attribute__((always_inline)) F operator()(F g, F) const {
    return gelu_fast(g);
  }
};
struct Geglu {
  template <class F>
  __attribute__((always_inline)) F operator()(F g, F u) const {
    return gelu_fast(g) * u;
  }
};

SS_CLONE_IMPL void gelu_tanh_impl(float* x, int n) { by_lanes<Gelu>(x, x, n, x); }
SS_CLONE_IMPL void geglu_impl(const float* gate, const float* up, int n, float* out) {
  by_lanes<Geglu>(gate, up, n, out);
}
}  // namespace

SS_CLONED(void, gelu_tanh, (float* x, int n), (x, n))
SS_CLONED(void, geglu, (const float* gate, const float* up, int n, float* out), (gate, up, n, out))

void gelu_tanh_scalar(float* x, int n) {
  for (int i = 0; i < n; ++i) x[i] = gelu_one(x[i]);
}

void geglu_scalar(const float* gate, const float* up, int n, float* out) {
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
