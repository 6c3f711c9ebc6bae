#include "ops/norm.h"

#include <cmath>
#include <cstring>

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

void layer_norm_scalar(const float* x, const float* weight, const float* bias, int n, float eps, float* out) {
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

namespace {
typedef float F8 __attribute__((vector_size(32)));
typedef double D8 __attribute__((vector_size(64)));

// The twin's sums in eight double lanes: one dependent double add per
// element had bounded Pythia's norms (3% of its prefill).
SS_CLONE_IMPL void layer_norm_impl(const float* x, const float* weight, const float* bias, int n, float eps,
                                   float* out) {
  auto load = [](const float* p) {
    F8 v;
    std::memcpy(&v, p, sizeof v);
    return v;
  };
  auto lanes_sum = [](D8 v) {
    double s = 0;
    for (int k = 0; k < 8; ++k) s += v[k];
    return s;
  };
  D8 sum8 = {};
  int i = 0;
  for (; i + 8 <= n; i += 8) sum8 += __builtin_convertvector(load(x + i), D8);
  double sum = lanes_sum(sum8);
  for (int j = i; j < n; ++j) sum += x[j];
  const float mean = static_cast<float>(sum / n);
  D8 var8 = {};
  for (i = 0; i + 8 <= n; i += 8) {
    const D8 d = __builtin_convertvector(load(x + i) - mean, D8);
    var8 += d * d;
  }
  double var = lanes_sum(var8);
  for (int j = i; j < n; ++j) {
    const float d = x[j] - mean;
    var += static_cast<double>(d) * d;
  }
  const float scale = 1.0f / std::sqrt(static_cast<float>(var / n) + eps);
  for (int j = 0; j < n; ++j) {
    const float y = (x[j] - mean) * scale * weight[j];
    out[j] = bias ? y + bias[j] : y;
  }
}
}  // namespace

SS_CLONED(void, layer_norm, (const float* x, const float* weight, const float* bias, int n, float eps, float* out),
          (x, weight, bias, n, eps, out))

}  // namespace ss
