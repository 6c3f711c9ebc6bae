#include "format/quantize_ref.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "util/float_int.h"
#include "util/fp16.h"

namespace ss {

namespace {

// Round half to even (the default rounding mode), as ggml's nearest_int;
// NaN gives 0 (util/float_int.h).
int nearest(float v) { return round_to_int(v); }

float half_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return fp16_to_fp32(h);
}

void put_half(uint8_t* p, float v) {
  const uint16_t h = fp32_to_fp16(v);
  std::memcpy(p, &h, 2);
}

// Scale and min for n values x mapped to levels 0..nmax: start from the
// min/max fit, then try nstep + 1 stretched grids (nmax + rmin + k * rdelta
// levels across the range) and keep the weighted least-squares fit of scale
// and min with the lowest weighted squared error. Returns the scale; *neg_min
// gets -min (>= 0: the min never rises above zero); L gets the levels.
float fit_scale_min(int n, int nmax, const float* x, const float* w, uint8_t* L, float* neg_min, float rmin,
                    float rdelta, int nstep) {
  float lo = x[0], hi = x[0], sum_w = w[0], sum_x = w[0] * x[0];
  for (int i = 1; i < n; ++i) {
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
    sum_w += w[i];
    sum_x += w[i] * x[i];
  }
  if (lo > 0) lo = 0;
  if (hi == lo) {
    std::fill(L, L + n, 0);
    *neg_min = -lo;
    return 0.0f;
  }
  float iscale = nmax / (hi - lo);
  float scale = 1 / iscale, best_error = 0;
  for (int i = 0; i < n; ++i) {
    L[i] = static_cast<uint8_t>(std::clamp(nearest(iscale * (x[i] - lo)), 0, nmax));
    const float diff = scale * L[i] + lo - x[i];
    best_error += w[i] * (diff * diff);
  }
  uint8_t trial[32];
  for (int step = 0; step <= nstep; ++step) {
    iscale = (rmin + rdelta * step + nmax) / (hi - lo);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      const int l = std::clamp(nearest(iscale * (x[i] - lo)), 0, nmax);
      trial[i] = static_cast<uint8_t>(l);
      sum_l += w[i] * l;
      sum_l2 += w[i] * l * l;
      sum_xl += w[i] * l * x[i];
    }
    const float det = sum_w * sum_l2 - sum_l * sum_l;
    if (!(det > 0)) continue;
    float this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
    float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
    if (this_min > 0) {
      this_min = 0;
      this_scale = sum_xl / sum_l2;
    }
    float err = 0;
    for (int i = 0; i < n; ++i) {
      const float diff = this_scale * trial[i] + this_min - x[i];
      err += w[i] * (diff * diff);
    }
    if (err < best_error) {
      std::copy(trial, trial + n, L);
      best_error = err;
      scale = this_scale;
      lo = this_min;
    }
  }
  *neg_min = -lo;
  return scale;
}

// Signed scale for n values mapped to levels -nmax..nmax-1 (stored + nmax in
// L), weighting each value by x^2: the least-squares scale of the amax grid,
// then of 18 grids stretched by +-0.1..0.9 levels, the best kept.
float fit_signed_scale(int n, int nmax, const float* x, int8_t* L) {
  float amax = 0, max = 0;
  for (int i = 0; i < n; ++i)
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      max = x[i];
    }
  if (amax < 1e-15f) {
    std::fill(L, L + n, 0);
    return 0.0f;
  }
  auto fit = [&](float iscale, float& sumlx, float& suml2) {
    sumlx = suml2 = 0;
    for (int i = 0; i < n; ++i) {
      const int l = std::clamp(nearest(iscale * x[i]), -nmax, nmax - 1);
      const float w = x[i] * x[i];
      sumlx += w * x[i] * l;
      suml2 += w * l * l;
    }
  };
  auto levels = [&](float iscale) {
    for (int i = 0; i < n; ++i) L[i] = static_cast<int8_t>(nmax + std::clamp(nearest(iscale * x[i]), -nmax, nmax - 1));
  };
  float iscale = -nmax / max, sumlx, suml2;
  fit(iscale, sumlx, suml2);
  levels(iscale);
  float scale = suml2 ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int step = -9; step <= 9; ++step) {
    if (step == 0) continue;
    iscale = -(nmax + 0.1f * step) / max;
    fit(iscale, sumlx, suml2);
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      levels(iscale);
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

}  // namespace

void quantize_block_k45(const float* x, bool five, uint8_t* blk) {
  const int nmax = five ? 31 : 15;
  uint8_t L[256];
  float scales[8], mins[8], weights[32];
  float max_scale = 0, max_min = 0;
  for (int j = 0; j < 8; ++j) {
    const float* xj = x + 32 * j;
    float sum_x2 = 0;
    for (int l = 0; l < 32; ++l) sum_x2 += xj[l] * xj[l];
    const float av_x = std::sqrt(sum_x2 / 32);
    // Large values weigh more: their error costs more in a dot product.
    for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(xj[l]);
    scales[j] = five ? fit_scale_min(32, nmax, xj, weights, L + 32 * j, &mins[j], -0.5f, 0.1f, 15)
                     : fit_scale_min(32, nmax, xj, weights, L + 32 * j, &mins[j], -1.0f, 0.1f, 20);
    max_scale = std::max(max_scale, scales[j]);
    max_min = std::max(max_min, mins[j]);
  }
  const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
  const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
  uint8_t* sc = blk + 4;
  std::memset(sc, 0, 12);
  int ls[8], lm[8];
  for (int j = 0; j < 8; ++j) {
    // As bytes first (a negative fit wraps, then clamps), like ggml.
    ls[j] = std::min(63, nearest(inv_scale * scales[j]) & 0xFF);
    lm[j] = std::min(63, nearest(inv_min * mins[j]) & 0xFF);
    if (j < 4) {
      sc[j] = static_cast<uint8_t>(ls[j]);
      sc[j + 4] = static_cast<uint8_t>(lm[j]);
    } else {
      sc[j + 4] = static_cast<uint8_t>((ls[j] & 0xF) | ((lm[j] & 0xF) << 4));
      sc[j - 4] = static_cast<uint8_t>(sc[j - 4] | ((ls[j] >> 4) << 6));
      sc[j] = static_cast<uint8_t>(sc[j] | ((lm[j] >> 4) << 6));
    }
  }
  put_half(blk, max_scale / 63.f);
  put_half(blk + 2, max_min / 63.f);
  // The levels again, against the scales as stored (6 bits times a half).
  for (int j = 0; j < 8; ++j) {
    const float d = half_at(blk) * ls[j];
    if (d == 0) continue;  // the fit's levels stay (they decode to the min)
    const float dm = half_at(blk + 2) * lm[j];
    for (int l = 0; l < 32; ++l)
      L[32 * j + l] = static_cast<uint8_t>(std::clamp(nearest((x[32 * j + l] + dm) / d), 0, nmax));
  }
  uint8_t* qh = blk + 16;
  uint8_t* qs = blk + (five ? 48 : 16);
  if (five) std::memset(qh, 0, 32);
  // Sub-blocks 2p and 2p+1 share 32 bytes: low and high nibbles.
  for (int p = 0; p < 4; ++p)
    for (int l = 0; l < 32; ++l) {
      const int a = L[64 * p + l], b = L[64 * p + 32 + l];
      qs[32 * p + l] = static_cast<uint8_t>((a & 0xF) | ((b & 0xF) << 4));
      if (five) qh[l] = static_cast<uint8_t>(qh[l] | ((a >> 4) << (2 * p)) | ((b >> 4) << (2 * p + 1)));
    }
}

void quantize_block_q6_k(const float* x, uint8_t* blk) {
  int8_t L[256];
  float scales[16], max_scale = 0, max_abs_scale = 0;
  for (int b = 0; b < 16; ++b) {
    scales[b] = fit_signed_scale(16, 32, x + 16 * b, L + 16 * b);
    if (std::fabs(scales[b]) > max_abs_scale) {
      max_abs_scale = std::fabs(scales[b]);
      max_scale = scales[b];
    }
  }
  std::memset(blk, 0, 210);
  if (max_abs_scale < 1e-15f) return;
  const float iscale = -128.f / max_scale;
  put_half(blk + 208, 1 / iscale);
  auto* sc = reinterpret_cast<int8_t*>(blk + 192);
  for (int b = 0; b < 16; ++b) sc[b] = static_cast<int8_t>(std::min(127, nearest(iscale * scales[b])));
  for (int b = 0; b < 16; ++b) {
    const float d = half_at(blk + 208) * sc[b];
    if (d == 0) continue;
    for (int l = 0; l < 16; ++l)
      L[16 * b + l] = static_cast<int8_t>(std::clamp(nearest(x[16 * b + l] / d), -32, 31) + 32);
  }
  // Per half of 128: ql holds low nibbles (quarters 0/1 low, 2/3 high), qh
  // the top two bits of the four quarters.
  for (int h = 0; h < 2; ++h) {
    uint8_t* ql = blk + 64 * h;
    uint8_t* qh = blk + 128 + 32 * h;
    const int8_t* Lh = L + 128 * h;
    for (int l = 0; l < 32; ++l) {
      ql[l] = static_cast<uint8_t>((Lh[l] & 0xF) | ((Lh[l + 64] & 0xF) << 4));
      ql[l + 32] = static_cast<uint8_t>((Lh[l + 32] & 0xF) | ((Lh[l + 96] & 0xF) << 4));
      qh[l] = static_cast<uint8_t>((Lh[l] >> 4) | ((Lh[l + 32] >> 4) << 2) | ((Lh[l + 64] >> 4) << 4) |
                                   ((Lh[l + 96] >> 4) << 6));
    }
  }
}

void quantize_block_q5_0(const float* x, uint8_t* blk) {
  float amax = 0, max = 0;
  for (int i = 0; i < 32; ++i)
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      max = x[i];
    }
  const float d = max / -16;
  const float id = d != 0 ? 1.0f / d : 0.0f;
  put_half(blk, d);
  uint32_t qh = 0;
  for (int i = 0; i < 16; ++i) {
    const int a = level_of(x[i] * id, 16, 31), b = level_of(x[i + 16] * id, 16, 31);
    blk[6 + i] = static_cast<uint8_t>((a & 0xF) | ((b & 0xF) << 4));
    qh |= static_cast<uint32_t>(a >> 4) << i;
    qh |= static_cast<uint32_t>(b >> 4) << (i + 16);
  }
  std::memcpy(blk + 2, &qh, 4);
}

void quantize_block_q5_1(const float* x, uint8_t* blk) {
  float lo = x[0], hi = x[0];
  for (int i = 1; i < 32; ++i) {
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
  }
  const float d = (hi - lo) / 31;
  const float id = d != 0 ? 1.0f / d : 0.0f;
  put_half(blk, d);
  put_half(blk + 2, lo);
  uint32_t qh = 0;
  for (int i = 0; i < 16; ++i) {
    const int a = std::clamp(saturate_to_int((x[i] - lo) * id + 0.5f), 0, 31);
    const int b = std::clamp(saturate_to_int((x[i + 16] - lo) * id + 0.5f), 0, 31);
    blk[8 + i] = static_cast<uint8_t>((a & 0xF) | ((b & 0xF) << 4));
    qh |= static_cast<uint32_t>((a >> 4) & 1) << i;
    qh |= static_cast<uint32_t>((b >> 4) & 1) << (i + 16);
  }
  std::memcpy(blk + 4, &qh, 4);
}

}  // namespace ss
