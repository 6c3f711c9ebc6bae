#pragma once
// Bf16 batch matmul for Q4_0 and Q8_0 weights on AMX-BF16 tiles: weights are
// dequantized exactly (d * q fits a float) and rounded to bf16, activations
// rounded to bf16 (both to nearest even, so each operand moves by at most
// 2^-8 of itself), products summed in float inside the tiles. Unlike int8
// tiles, a bf16 tile product needs no per-block scaling, so the sums stay
// in the tiles for the whole row: about three times the int8 tiles' rate
// for batches. Used by ActQuant::Fast for 4 or more activation rows where
// the CPU has AMX-BF16 (Sapphire Rapids and later) and the cap allows it;
// elsewhere Fast batches take the int8 kernels (matmul.h).
#include <cstdint>
#include <vector>

#include "format/tensor.h"
#include "util/aligned_vector.h"

namespace ss {

// fp32_to_bf16 (nearest even, NaN stays NaN) with subnormals flushed to
// zero, as the AMX conversion and multiply treat them; bf16_to_fp32 (util/
// fp16.h) reads the result back.
uint16_t to_bf16(float x);

// X [n x cols] (cols % 32 == 0) rounded to bf16 and laid out as the tile
// unit's B operand: per 16 activation rows and block of 32 columns,
// [k/2][row][2] (rows past n are 0): [group][block][16][16][2].
struct Bf16Acts {
  int n = 0;
  int64_t cols = 0;
  AlignedVector<uint16_t> packed;

  int64_t blocks() const { return cols / 32; }
};
void pack_acts_bf16(const float* x, int n, int64_t cols, Bf16Acts& out);

// This CPU has AMX-BF16 tiles and the cap (util/cpu_features.h) allows them.
bool bf16_tiles_usable();
// W's type and row length fit, and this CPU and kernel allow AMX-BF16.
bool bf16_matmul_supported(const TensorView& w);
// Rows [r0, r1) of Y = X · Wᵀ; Y [n x rows]; r0 a multiple of 16.
void matmul_bf16_rows(const TensorView& w, const Bf16Acts& xb, float* y, int64_t r0, int64_t r1);
// Blocks [k0, k0 + kn) of weight rows [rt, rt + 16) as the kernel's bf16 A
// tiles, wt [kn][16][32]; rows from `end` on are 0. From W's interleaved
// groups where it has them (whole groups only), else its plain rows: the
// same bits either way. Needs AVX-512 BF16 (not the tiles).
void bf16_tile_rows(const TensorView& w, int64_t rt, int64_t end, int64_t k0, int64_t kn, uint16_t* wt);
// Scalar twin: the same bf16 operands, products summed in double.
void matmul_bf16_reference(const TensorView& w, const float* x, int n, float* y);

}  // namespace ss
