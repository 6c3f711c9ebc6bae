#include "ops/rope.h"

#include <algorithm>
#include <cmath>

namespace ss {

RopeTable::RopeTable(int rope_dim, double base, const RopeScaling& sc) {
  const double fs = sc.freq_scale;
  double low = 0, high = 0;
  if (sc.ext_factor != 0) {
    // ggml_rope_yarn_corr_dims: the dims whose wavelength spans beta_fast
    // (low) and beta_slow (high) turns over the original context.
    auto corr_dim = [&](double n_rot) {
      return rope_dim * std::log(static_cast<double>(sc.orig_ctx) / (n_rot * 2 * M_PI)) / (2 * std::log(base));
    };
    low = std::max(0.0, std::floor(corr_dim(sc.beta_fast)));
    high = std::min(static_cast<double>(rope_dim - 1), std::ceil(corr_dim(sc.beta_slow)));
    mscale_ = sc.attn_factor * (1.0 + 0.1 * std::log(1.0 / fs));
  } else {
    mscale_ = sc.attn_factor;
  }
  for (int i = 0; i < rope_dim / 2; ++i) {
    const double extrap = std::pow(base, -2.0 * i / static_cast<double>(rope_dim));
    double mix = 0;
    if (sc.ext_factor != 0) {
      const double y = (i - low) / std::max(0.001, high - low);
      mix = (1 - std::min(1.0, std::max(0.0, y))) * sc.ext_factor;
    }
    freq_.push_back(extrap * fs * (1 - mix) + extrap * mix);
  }
}

void RopeTable::angles(int64_t pos, float* cos_out, float* sin_out) const {
  for (size_t i = 0; i < freq_.size(); ++i) {
    const double a = static_cast<double>(pos) * freq_[i];
    cos_out[i] = static_cast<float>(std::cos(a) * mscale_);
    sin_out[i] = static_cast<float>(std::sin(a) * mscale_);
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
