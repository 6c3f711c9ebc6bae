#pragma once
// Y = X · Wᵀ for a batch of activation rows against a weight matrix of any
// supported type. Weights are read once per call for all rows of X.
#include <span>

#include "format/tensor.h"
#include "util/thread_pool.h"

namespace ss {

// How activations meet quantized weights. None: weights decoded exactly,
// float activations (every type). Int8: Q4_0/Q8_0/Q4_K/Q5_K/Q6_K weights take
// activations rounded to int8 per block of 32, as llama.cpp does
// (matmul_int8.h), where the CPU has the kernels; other types and CPUs stay
// on the float path. Fast: as Int8 below kBf16MinRows activation rows
// (decode, small batches); larger batches meet bf16-rounded Q4_0/Q8_0
// weights as bf16 in AMX-BF16 tiles (matmul_bf16.h), where the CPU has them,
// else (and for K-quants) as Int8. A row's rounding then depends on how many
// rows share the call (int8 alone, bf16 in a large batch), as batch size
// changes results in llama.cpp and vLLM.
enum class ActQuant { None, Int8, Fast };

// Rows from which Fast batches take the bf16 tiles: fewer run faster as int8
// (VNNI, or AMX int8 tiles from amx_min_rows). kernels_bench, 2048 x 2048
// interleaved, one thread on the Intel AMX VM, GFLOP/s bf16 tiles
// (MatmulFastInterleaved) against int8 (MatmulInt8Interleaved), two rounds:
// Q4_0 at 8 rows 144-146 vs 446-481, 16 259-264 vs 487, 32 488-496 vs
// 533-549, 64 763-793 vs 624-633; Q8_0 at 16 199-200 vs 419-425, 32 371-383
// vs 468-493, 64 628-646 vs 576-617.
inline constexpr int kBf16MinRows = 64;

// The kernel a matmul of W with n activation rows under `aq` runs on this
// CPU within the cap of util/cpu_features.h, and what it promises:
//  - Float (Highway; every type, every CPU): within float rounding of
//    matmul_reference; the same bits for any thread count; not the same bits
//    across SIMD targets (vector widths and FMA differ).
//  - Int8Vnni (AVX-512 VNNI; decode, and batches without AMX or below
//    amx_min_rows of matmul_int8.h, Q6_K always):
//    within float rounding of matmul_int8_reference; the same bits for any
//    thread count and for one matrix alone or in matmul_shared_input; NOT
//    the same bits for a matrix read interleaved (ops/interleave.h) as for
//    its plain rows, whose blocks are summed in another order.
//  - Int8Amx (AMX int8 tiles; batches of amx_min_rows+: 32 rows, Q4_K/Q5_K
//    64; not Q6_K): as Int8Vnni,
//    and the same bits for interleaved and plain rows (tiles see the same
//    blocks).
//  - Int8Avx2 (AVX2 without VNNI; every row count; Q4_0 and Q8_0 plain or
//    interleaved, Q4_K/Q5_K/Q6_K interleaved only, else the float path):
//    within float rounding of matmul_int8_reference; the same bits for any
//    thread count and for one matrix alone or in matmul_shared_input; NOT
//    the same bits for interleaved Q4_0/Q8_0 as for their plain rows.
//  - Int8AvxVnni (AVX2 + AVX-VNNI, no AVX-512 VNNI): the Int8Avx2 tiles
//    with vpdpbusd on ymm; the same bits as Int8Avx2.
//  - Bf16Amx (AMX-BF16 tiles; Fast, Q4_0/Q8_0 batches of kBf16MinRows+): within
//    bf16 rounding of matmul_bf16_reference; the same bits for interleaved
//    and plain rows and for any thread count.
enum class MatmulKernel { Float, Int8Vnni, Int8Avx2, Int8AvxVnni, Int8Amx, Bf16Amx };
MatmulKernel matmul_kernel(const TensorView& w, int n, ActQuant aq);
const char* matmul_kernel_name(MatmulKernel k);

// W: [rows=ne1 x cols=ne0]; X: [n x cols] (row stride cols); Y: [n x rows].
void matmul(const TensorView& w, const float* x, int n, float* y, ThreadPool& pool, ActQuant aq = ActQuant::None);

// Several matrices applied to the same X (q, k, v; gate, up): outs[i].y =
// X · outs[i].wᵀ. With int8 activations X is quantized once and all rows go
// through one parallel pass; otherwise one matmul each (same results).
struct MatmulOut {
  const TensorView* w;
  float* y;
};
void matmul_shared_input(std::span<const MatmulOut> outs, const float* x, int n, ThreadPool& pool,
                         ActQuant aq = ActQuant::None);

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
