#pragma once
#include <cstdint>

namespace ss {
// out = x / sqrt(mean(x²) + eps) * weight, over n elements (out may alias x).
// Dispatched (AVX-512, AVX2, baseline); rms_norm_scalar is its twin.
void rms_norm(const float* x, const float* weight, int n, float eps, float* out);
void rms_norm_scalar(const float* x, const float* weight, int n, float eps, float* out);
}  // namespace ss
