#pragma once
#include <cstdint>

namespace ss {
// out = x / sqrt(mean(x²) + eps) * weight, over n elements (out may alias x).
void rms_norm(const float* x, const float* weight, int n, float eps, float* out);
}  // namespace ss
