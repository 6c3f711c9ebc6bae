#include "ops/attention.h"

#include <cmath>

#include "ops/matmul.h"

namespace ss {

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__)
#define SS_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define SS_CLONES
#endif

SS_CLONES void attn_scores(const float* q, const float* k_rows, int stride, int count, int hd, float scale, float* scores) {
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

SS_CLONES void softmax(float* x, int n) {
  float mx = x[0];
  for (int i = 1; i < n; ++i) mx = x[i] > mx ? x[i] : mx;
  // A separate exp pass lets GCC use glibc's vector expf (libmvec).
#pragma omp simd
  for (int i = 0; i < n; ++i) x[i] = std::exp(x[i] - mx);
  float sum = 0;
  for (int i = 0; i < n; ++i) sum += x[i];
  const float inv = 1.0f / sum;
  for (int i = 0; i < n; ++i) x[i] *= inv;
}

void attn_scores_scalar(const float* q, const float* k_rows, int stride, int count, int hd, float scale, float* scores) {
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
