#pragma once
// Y = X · Wᵀ for a batch of activation rows against a weight matrix of any
// supported type. Weights are read once per call for all rows of X.
#include "format/tensor.h"
#include "util/thread_pool.h"

namespace ss {

// W: [rows=ne1 x cols=ne0]; X: [n x cols] (row stride cols); Y: [n x rows].
void matmul(const TensorView& w, const float* x, int n, float* y, ThreadPool& pool);

// Scalar reference used by tests (no threading, plain loops).
void matmul_reference(const TensorView& w, const float* x, int n, float* y);

// Eight independent partial sums let the compiler vectorise without -ffast-math.
inline float dot_f32(const float* a, const float* b, int n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k) acc[k] += a[i + k] * b[i + k];
  float s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

// One embedding row (any type) as floats.
void embedding_row(const TensorView& table, int64_t row, float* out);

}  // namespace ss
