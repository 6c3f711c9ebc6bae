#pragma once
// exp without a libm call, so loops over it vectorise (GCC/Clang vector
// extensions or plain floats, the same operations lane by lane): x = k*ln2 + r,
// |r| <= ln2/2, exp(r) by its degree-6 Taylor polynomial (relative error
// below 2e-7), 2^k through the exponent bits.
#include <cstdint>

#include "ops/lanes.h"  // its pragma: vector arguments here are always inlined

namespace ss::fast_exp {

#define SS_FAST_EXP_INLINE __attribute__((always_inline)) inline

// __builtin_bit_cast, not std::bit_cast: the latter is an ordinary function
// that an unoptimised (Debug/sanitizer) build calls out of line, and a
// 64-byte vector returned from the baseline-compiled function to an AVX-512
// clone (ops/clones.h) crosses two different vector ABIs.
template <class F>
SS_FAST_EXP_INLINE auto to_bits(F f) {
  if constexpr (sizeof(F) == sizeof(float)) {
    return __builtin_bit_cast(uint32_t, f);
  } else {
    typedef uint32_t Bits __attribute__((vector_size(sizeof(F))));
    return __builtin_bit_cast(Bits, f);
  }
}
template <class F, class B>
SS_FAST_EXP_INLINE F from_bits(B u) {
  return __builtin_bit_cast(F, u);
}

// exp(x) = p * 2^k for x in [-87, 88]: k = round(x*log2e) (as a float, and
// in t's low mantissa bits: t = k + 1.5*2^23), p = exp(x - k*ln2) by the
// polynomial. Callers apply 2^k their own way.
template <class F>
struct ExpParts {
  F p, k, t;
};
template <class F>
SS_FAST_EXP_INLINE ExpParts<F> exp_parts(F x) {
  const F t = x * 1.44269504f + 12582912.0f;  // 1.5*2^23: low mantissa bits hold round(x*log2e)
  const F k = t - 12582912.0f;
  const F r = (x - k * 0.693145752f) - k * 1.42860677e-6f;
  F p = F{} + 1.0f / 720;
  p = p * r + 1.0f / 120;
  p = p * r + 1.0f / 24;
  p = p * r + 1.0f / 6;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  return {p, k, t};
}

// exp(x) for x in [-87, 88] (x is clamped to it: below, the result is tiny
// but normal rather than 0; above, ~1.65e38 rather than inf). F is float or
// a float vector.
template <class F>
SS_FAST_EXP_INLINE F exp_clamped(F x) {
  x = x < -87.0f ? F{} - 87.0f : x;
  x = x > 88.0f ? F{} + 88.0f : x;
  const ExpParts<F> e = exp_parts(x);
  const auto ki = to_bits(e.t) - to_bits(12582912.0f);  // k mod 2^32
  return e.p * from_bits<F>((ki + 127u) << 23);
}

}  // namespace ss::fast_exp
