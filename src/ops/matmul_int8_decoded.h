#pragma once
// VNNI batches (CPUs without AMX tiles, such as Ice Lake and Zen 4/5, and
// Q6_K everywhere, whose batches never take the tiles): each interleaved
// 16-row group (ops/interleave.h) is unpacked once into unsigned bytes and
// float scales, and then every group of activation rows meets those bytes
// with vpdpbusd alone. The tiles that unpack the nibbles (and Q5_K's fifth
// bits, Q6_K's high bits) for each group of four activation rows spend
// vector ALU slots that, on CPUs with two 512-bit ports, the vpdpbusd
// themselves need. Internal to ops/: matmul_int8.cpp dispatches here.
#include <cstdint>

#include "format/tensor.h"
#include "ops/matmul_int8.h"

namespace ss {

// Activation rows from which a batch of W's type takes the decoded path:
// below, the unpacking is shared by too few rows to pay for its stores.
// kernels_bench 2048 x 2048, one thread, Ice Lake VM, medians of six
// (tiles vs decoded, GFLOP/s): Q4_0 at 16 rows 277 vs 194, 32 216 vs 211,
// 64 199 vs 209, 128 185 vs 227; Q4_K at 8 190 vs 161, 16 187 vs 196; Q5_K
// at 8 154 vs 134, 16 154 vs 207; Q6_K at 8 131 vs 147, 16 123 vs 205.
inline int decoded_batch_min_rows(GgmlType t) { return t == GgmlType::Q4_0 ? 64 : 16; }

// W's type has a decoded batch kernel (Q4_0, Q4_K, Q5_K, Q6_K; Q8_0's
// interleaved bytes are already what the kernel reads).
bool decoded_batch_type(GgmlType t);

// Rows [r0, r1) (whole groups of W's interleaved copy) of Y = X · Wᵀ, Y
// [xq.n x W.ne1]. Needs AVX-512 VNNI and W interleaved.
void decoded_batch_matmul(const TensorView& w, const QuantizedActs& xq, float* y, int64_t r0, int64_t r1);

}  // namespace ss
