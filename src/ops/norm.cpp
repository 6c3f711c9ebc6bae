#include "ops/norm.h"

#include <cmath>

#include "ops/clones.h"
#include "ops/matmul.h"

namespace ss {

namespace {
SS_CLONE_IMPL void rms_norm_impl(const float* x, const float* weight, int n, float eps, float* out) {
  // dot_f32's eight partial sums vectorise without reassociating freely.
  const float ss = dot_f32(x, x, n) / static_cast<float>(n) + eps;
  const float scale = 1.0f / std::sqrt(ss);
  for (int i = 0; i < n; ++i) out[i] = weight[i] * (scale * x[i]);
}
}  // namespace

SS_CLONED(void, rms_norm, (const float* x, const float* weight, int n, float eps, float* out), (x, weight, n, eps, out))

void rms_norm_scalar(const float* x, const float* weight, int n, float eps, float* out) {
  double ss = 0;
  for (int i = 0; i < n; ++i) ss += static_cast<double>(x[i]) * x[i];
  const double scale = 1.0 / std::sqrt(ss / n + eps);
  for (int i = 0; i < n; ++i) out[i] = static_cast<float>(weight[i] * (scale * x[i]));
}

void layer_norm(const float* x, const float* weight, const float* bias, int n, float eps, float* out) {
  double sum = 0;
  for (int i = 0; i < n; ++i) sum += x[i];
  const float mean = static_cast<float>(sum / n);
  double var = 0;
  for (int i = 0; i < n; ++i) {
    const float d = x[i] - mean;
    var += static_cast<double>(d) * d;
  }
  const float scale = 1.0f / std::sqrt(static_cast<float>(var / n) + eps);
  for (int i = 0; i < n; ++i) {
    const float y = (x[i] - mean) * scale * weight[i];
    out[i] = bias ? y + bias[i] : y;
  }
}

}  // namespace ss
