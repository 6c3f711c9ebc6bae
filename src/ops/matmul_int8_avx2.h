#pragma once
// Int8-activation kernels for AVX2 CPUs without AVX-512 VNNI (Haswell to
// Arrow Lake, Zen 1-3): Q4_0 and Q8_0 on their interleaved copies where they
// have one, else on plain rows; Q4_K, Q5_K and Q6_K on their interleaved
// copies only. The same integer dot per (weight block, activation block) as
// matmul_int8_reference (vpmaddubsw + vpmaddwd, or with AVX-VNNI vpdpbusd on
// ymm), scaled and summed in floats. Internal to ops/: matmul_int8.cpp
// dispatches here.
#include <cstdint>

#include "format/tensor.h"
#include "ops/matmul_int8.h"

namespace ss {

// W's type has an AVX2 kernel for plain rows (Q4_0, Q8_0); the K-quants have
// one for interleaved copies only (the caller checks the CPU and row length).
bool int8_avx2_plain_type(GgmlType t);

// Rows [r0, r1) of Y = X · Wᵀ, Y [xq.n x W.ne1] (r0, r1 multiples of 16 but
// at W's end when W is interleaved). Needs AVX2.
void matmul_int8_avx2_rows(const TensorView& w, const QuantizedActs& xq, float* y, int64_t r0, int64_t r1);
// The same with AVX-VNNI (same bits). Needs AVX2 + AVX-VNNI.
void matmul_int8_avxvnni_rows(const TensorView& w, const QuantizedActs& xq, float* y, int64_t r0, int64_t r1);

// One block of 32 activations rounded as quantize_block_scalar rounds them
// (matmul_int8.cpp), bit for bit: d = max|x| / 127, q = x / d to nearest even,
// the sums of q[0, 16) and q[16, 32). Needs AVX2.
void quantize_block_avx2(const float* x, int8_t* q, float* d_out, int32_t* half_sums);

}  // namespace ss
