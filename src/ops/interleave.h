#pragma once
// Q4_0 weights interleaved 16 rows at a time, for the int8 GEMV: one 512-bit
// register then holds four weights of each of 16 rows, so vpdpbusd yields 16
// row sums in its 16 lanes with no per-row shuffles or horizontal adds, and
// one vcvtph2ps yields the 16 rows' block scales. Same bytes as Q4_0 (18
// per 32 weights), so a matrix read per token costs the same memory.
//
// Results (matmul.h, MatmulKernel): the AMX paths (int8 and bf16 tiles)
// transpose a group back to rows and give the plain matrix's bits exactly;
// the VNNI GEMV sums a row's blocks in another order than on plain rows, so
// there interleaved and plain agree within float rounding, not bit for bit.
// Without AMX (Zen 4/5, Ice Lake) every batch takes VNNI.
//
// Layout of a [rows x cols] matrix (rows % 16 == 0, cols % 32 == 0; nb =
// cols / 32): group g = rows 16g..16g+15, block b at byte (g * nb + b) * 288:
//   [0, 32)    the 16 rows' f16 scales d, row m at 2m;
//   [32, 288)  four chunks j of 64 bytes: 32 + 64j + 4m + i holds byte
//              4j + i of row m's nibbles (low nibble: weight 4j + i, high
//              nibble: weight 16 + 4j + i).
#include <cstddef>
#include <cstdint>

#include "format/ggml_types.h"
#include "format/tensor.h"

namespace ss {

inline constexpr int kInterleaveRows = 16;
inline constexpr int64_t kInterleavedBlockBytes = kInterleaveRows * kQ4_0Bytes;  // 288

// W can be interleaved (Q4_0 with the shape above).
bool can_interleave(const TensorView& w);
// Bytes of W's interleaved copy: as many as W's own.
size_t interleaved_bytes(const TensorView& w);
// Writes the interleaved copy of W's rows (can_interleave(w) must hold) to
// dst [interleaved_bytes(w)].
void interleave_q4_0(const TensorView& w, uint8_t* dst);
// Where rows r.. begin in the bytes the kernels read: the interleaved copy
// when there is one (r % 16 == 0: rows r..r+15 then follow contiguously),
// else W's own rows.
const uint8_t* rows_begin(const TensorView& w, int64_t r);

}  // namespace ss
