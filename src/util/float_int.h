#pragma once
// Float to integer conversions defined for every input. A C++ cast of NaN,
// an infinity or a value outside the target type's range is undefined
// behaviour (x86 happens to give INT_MIN; UBSan reports it), and NaN and
// infinities do reach the quantizers: a model file's weights, a restored
// session's KV rows, activations that overflowed. NaN maps to 0 (the level
// that decodes to zero, for the symmetric types), everything else saturates.
#include <climits>
#include <cmath>

namespace ss {

// Truncated toward zero, as a cast.
inline int saturate_to_int(float v) {
  if (std::isnan(v)) return 0;
  if (v >= 2147483648.0f) return INT_MAX;
  if (v < -2147483648.0f) return INT_MIN;
  return static_cast<int>(v);
}

// Rounded to nearest, ties to even (the default rounding mode: ggml's
// nearest_int, and the SIMD conversions).
inline int round_to_int(float v) { return saturate_to_int(std::nearbyint(v)); }

// ggml's level for a scaled value v of the symmetric types (Q4_0, Q5_0):
// v + zero + 0.5 truncated, within [0, top]; NaN at `zero`, the level that
// decodes to 0.
inline int level_of(float v, int zero, int top) {
  if (std::isnan(v)) return zero;
  const int l = saturate_to_int(v + static_cast<float>(zero) + 0.5f);
  return l < 0 ? 0 : l > top ? top : l;
}

}  // namespace ss
