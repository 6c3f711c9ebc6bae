#pragma once
// Attention inner loops over a run of KV rows that sit contiguously in one
// block (row stride = kv_dim floats). Compiled for AVX2+FMA and baseline x86-64
// with runtime selection (GCC target_clones); the scalar versions are the
// reference twins used by tests.
namespace ss {

// scores[r] = scale * dot(q, k_rows + r*stride) for r < count.
void attn_scores(const float* q, const float* k_rows, int stride, int count, int hd, float scale, float* scores);
// acc[d] += sum_r probs[r] * v_rows[r*stride + d].
void attn_accumulate(const float* probs, const float* v_rows, int stride, int count, int hd, float* acc);
// In-place softmax; returns nothing, probabilities sum to 1.
void softmax(float* x, int n);

void softmax_scalar(float* x, int n);
void attn_scores_scalar(const float* q, const float* k_rows, int stride, int count, int hd, float scale, float* scores);
void attn_accumulate_scalar(const float* probs, const float* v_rows, int stride, int count, int hd, float* acc);

}  // namespace ss
