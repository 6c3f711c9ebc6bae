#pragma once
#include <cstdint>

namespace ss {
// out = x / sqrt(mean(x²) + eps) * weight, over n elements (out may alias x).
// Dispatched (AVX-512, AVX2, baseline); rms_norm_scalar is its twin.
void rms_norm(const float* x, const float* weight, int n, float eps, float* out);
void rms_norm_scalar(const float* x, const float* weight, int n, float eps, float* out);
// out = (x - mean(x)) / sqrt(var(x) + eps) * weight (+ bias when not null),
// mean and variance summed in double (as ggml's norm does); out may alias x.
// Dispatched, its sums in eight lanes; layer_norm_scalar (one sum) is its twin.
void layer_norm(const float* x, const float* weight, const float* bias, int n, float eps, float* out);
void layer_norm_scalar(const float* x, const float* weight, const float* bias, int n, float eps, float* out);
}  // namespace ss
