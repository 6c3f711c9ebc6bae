#include "ops/activations.h"

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

}  // namespace ss
