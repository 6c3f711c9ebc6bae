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

float dot_f32(const float* a, const float* b, int n);

// One embedding row (any type) as floats.
void embedding_row(const TensorView& table, int64_t row, float* out);

}  // namespace ss
