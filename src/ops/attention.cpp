#include "ops/attention.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>

#include "ops/clones.h"
#include "ops/matmul.h"

namespace ss {

SS_CLONES void attn_scores(const float* q, const float* k_rows, int stride, int count, int hd, float scale,
                           float* scores) {
  for (int r = 0; r < count; ++r) scores[r] = dot_f32(q, k_rows + static_cast<long>(r) * stride, hd) * scale;
}

SS_CLONES void attn_accumulate(const float* probs, const float* v_rows, int stride, int count, int hd,
                               float* __restrict__ acc) {
  for (int r = 0; r < count; ++r) {
    const float p = probs[r];
    const float* __restrict__ v = v_rows + static_cast<long>(r) * stride;
    for (int d = 0; d < hd; ++d) acc[d] += p * v[d];
  }
}

namespace {
// exp for x <= 0 without a libm call, so the loop vectorises: x = k*ln2 + r,
// |r| <= ln2/2, exp(r) by its degree-6 Taylor polynomial (relative error
// below 2e-7), 2^k through the exponent bits.
inline float exp_nonpositive(float x) {
  x = x < -87.0f ? -87.0f : x;
  const float t = x * 1.44269504f + 12582912.0f;  // 1.5*2^23: low mantissa bits hold round(x*log2e)
  const float k = t - 12582912.0f;
  const float r = (x - k * 0.693145752f) - k * 1.42860677e-6f;
  float p = 1.0f / 720;
  p = p * r + 1.0f / 120;
  p = p * r + 1.0f / 24;
  p = p * r + 1.0f / 6;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const uint32_t ki = std::bit_cast<uint32_t>(t) - std::bit_cast<uint32_t>(12582912.0f);  // k mod 2^32
  return p * std::bit_cast<float>((ki + 127u) << 23);
}
}  // namespace

SS_CLONES void softmax(float* x, int n) {
  // Eight lanes for the max and the sum keep both reductions vectorisable and
  // their order fixed.
  float m8[8], s8[8] = {};
  for (int j = 0; j < 8; ++j) m8[j] = x[0];
  int i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) m8[j] = x[i + j] > m8[j] ? x[i + j] : m8[j];
  float mx = m8[0];
  for (int j = 1; j < 8; ++j) mx = m8[j] > mx ? m8[j] : mx;
  for (; i < n; ++i) mx = x[i] > mx ? x[i] : mx;
  for (i = 0; i < n; ++i) x[i] = exp_nonpositive(x[i] - mx);
  for (i = 0; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) s8[j] += x[i + j];
  float sum = ((s8[0] + s8[4]) + (s8[1] + s8[5])) + ((s8[2] + s8[6]) + (s8[3] + s8[7]));
  for (; i < n; ++i) sum += x[i];
  const float inv = 1.0f / sum;
  for (int i = 0; i < n; ++i) x[i] *= inv;
}

void attn_online_init(int g, int hd, float* m, float* l, float* acc) {
  for (int h = 0; h < g; ++h) {
    m[h] = -INFINITY;
    l[h] = 0.0f;
  }
  std::fill(acc, acc + static_cast<long>(g) * hd, 0.0f);
}

namespace {
// HD > 0: the head size is a compile-time constant, so the per-key loops
// unroll fully (heads are small: 8 to 128); HD == 0: any size.
template <int HD>
inline void online_update(const float* q, int g, const float* k_rows, const float* v_rows, int stride, int count,
                          int hd_runtime, float scale, float* m, float* l, float* __restrict__ acc,
                          float* __restrict__ scratch) {
  const int hd = HD > 0 ? HD : hd_runtime;
  // Scores [g][count]: each key row is loaded once for the whole group.
  for (int r = 0; r < count; ++r) {
    const float* k = k_rows + static_cast<long>(r) * stride;
    for (int h = 0; h < g; ++h) scratch[h * count + r] = dot_f32(q + h * hd, k, hd) * scale;
  }
  for (int h = 0; h < g; ++h) {
    float* s = scratch + h * count;
    float mx = m[h];
    for (int r = 0; r < count; ++r) mx = s[r] > mx ? s[r] : mx;
    // The first run has m = -inf: nothing to rescale.
    const float corr = m[h] == -INFINITY ? 0.0f : exp_nonpositive(m[h] - mx);
    for (int r = 0; r < count; ++r) s[r] = exp_nonpositive(s[r] - mx);
    float sum = 0;
    for (int r = 0; r < count; ++r) sum += s[r];
    m[h] = mx;
    l[h] = l[h] * corr + sum;
    float* __restrict__ a = acc + h * hd;
    for (int d = 0; d < hd; ++d) a[d] *= corr;
  }
  for (int r = 0; r < count; ++r) {
    const float* __restrict__ v = v_rows + static_cast<long>(r) * stride;
    for (int h = 0; h < g; ++h) {
      const float p = scratch[h * count + r];
      float* __restrict__ a = acc + h * hd;
      for (int d = 0; d < hd; ++d) a[d] += p * v[d];
    }
  }
}
}  // namespace

SS_CLONES void attn_online_update(const float* q, int g, const float* k_rows, const float* v_rows, int stride,
                                  int count, int hd, float scale, float* m, float* l, float* acc, float* scratch) {
  switch (hd) {
    case 8:
      return online_update<8>(q, g, k_rows, v_rows, stride, count, hd, scale, m, l, acc, scratch);
    case 16:
      return online_update<16>(q, g, k_rows, v_rows, stride, count, hd, scale, m, l, acc, scratch);
    case 32:
      return online_update<32>(q, g, k_rows, v_rows, stride, count, hd, scale, m, l, acc, scratch);
    case 64:
      return online_update<64>(q, g, k_rows, v_rows, stride, count, hd, scale, m, l, acc, scratch);
    case 128:
      return online_update<128>(q, g, k_rows, v_rows, stride, count, hd, scale, m, l, acc, scratch);
    default:
      return online_update<0>(q, g, k_rows, v_rows, stride, count, hd, scale, m, l, acc, scratch);
  }
}

void attn_online_finish(int g, int hd, const float* l, const float* acc, float* out) {
  for (int h = 0; h < g; ++h) {
    const float inv = 1.0f / l[h];
    for (int d = 0; d < hd; ++d) out[h * hd + d] = acc[h * hd + d] * inv;
  }
}

void softmax_scalar(float* x, int n) {
  float mx = x[0];
  for (int i = 1; i < n; ++i) mx = std::max(mx, x[i]);
  double sum = 0;
  for (int i = 0; i < n; ++i) sum += (x[i] = std::exp(x[i] - mx));
  for (int i = 0; i < n; ++i) x[i] = static_cast<float>(x[i] / sum);
}

void attn_scores_scalar(const float* q, const float* k_rows, int stride, int count, int hd, float scale,
                        float* scores) {
  for (int r = 0; r < count; ++r) {
    float s = 0;
    for (int d = 0; d < hd; ++d) s += q[d] * k_rows[static_cast<long>(r) * stride + d];
    scores[r] = s * scale;
  }
}

void attn_accumulate_scalar(const float* probs, const float* v_rows, int stride, int count, int hd, float* acc) {
  for (int r = 0; r < count; ++r)
    for (int d = 0; d < hd; ++d) acc[d] += probs[r] * v_rows[static_cast<long>(r) * stride + d];
}

}  // namespace ss
