#pragma once
// Runtime-dispatched SIMD matmul kernels (Highway: AVX-512, AVX2, SSE4,
// NEON, portable fallback). dequantize_row / matmul_reference in plain C++
// are their scalar twins.
#include <cstdint>
#include <string>
#include <vector>

#include "format/tensor.h"

namespace ss {

// Rows [r0, r1) of Y = X · Wᵀ; W [rows x cols], X [n x cols], Y [n x rows].
void matmul_rows_simd(const TensorView& w, const float* x, int n, float* y, int64_t r0, int64_t r1);
// One weight row decoded to floats, bit-identical to dequantize_row.
void dequantize_row_simd(GgmlType t, const void* row, float* dst, int64_t n);

// Instruction sets compiled in and usable on this CPU within the cap of
// util/cpu_features.h, best first; tests restrict dispatch to each in turn
// and compare against the scalar twins.
struct SimdTarget {
  int64_t bits;
  std::string name;
};
std::vector<SimdTarget> simd_targets();
void simd_restrict_to(int64_t target_bits);  // 0: lift the restriction
// The target dispatch picks now ("AVX3", "AVX2", ...).
std::string simd_active_target();

}  // namespace ss
