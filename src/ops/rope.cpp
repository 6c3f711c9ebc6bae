#include "ops/rope.h"

#include <cmath>

namespace ss {

RopeTable::RopeTable(int rope_dim, float base) {
  for (int i = 0; i < rope_dim / 2; ++i)
    inv_freq_.push_back(std::pow(static_cast<double>(base), -2.0 * i / static_cast<double>(rope_dim)));
}

void RopeTable::angles(int64_t pos, float* cos_out, float* sin_out) const {
  for (size_t i = 0; i < inv_freq_.size(); ++i) {
    const double a = static_cast<double>(pos) * inv_freq_[i];
    cos_out[i] = static_cast<float>(std::cos(a));
    sin_out[i] = static_cast<float>(std::sin(a));
  }
}

void rope_apply(float* x, int n_heads, int head_dim, int pairs, const float* cos_v, const float* sin_v,
                RopeStyle style) {
  for (int h = 0; h < n_heads; ++h) {
    float* v = x + h * head_dim;
    for (int i = 0; i < pairs; ++i) {
      const int a = style == RopeStyle::Interleaved ? 2 * i : i;
      const int b = style == RopeStyle::Interleaved ? 2 * i + 1 : i + pairs;
      const float x0 = v[a], x1 = v[b];
      v[a] = x0 * cos_v[i] - x1 * sin_v[i];
      v[b] = x0 * sin_v[i] + x1 * cos_v[i];
    }
  }
}

}  // namespace ss
