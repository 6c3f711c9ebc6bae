#include "ops/norm.h"

#include <cmath>

namespace ss {
void rms_norm(const float* x, const float* weight, int n, float eps, float* out) {
  float ss = 0.0f;
  for (int i = 0; i < n; ++i) ss += x[i] * x[i];
  ss /= static_cast<float>(n);
  ss += eps;
  const float scale = 1.0f / std::sqrt(ss);
  for (int i = 0; i < n; ++i) out[i] = weight[i] * (scale * x[i]);
}
}  // namespace ss
