#pragma once
// Int8-activation matmul for Q4_0, Q8_0, Q4_K, Q5_K and Q6_K weights: the
// arithmetic llama.cpp uses for these types. Activations are rounded per
// block of 32 to int8 with one float scale (d = max|x| / 127, so each value
// moves by at most d / 2); weight blocks stay integers; each (weight block,
// activation block) pair is an exact integer dot product, scaled once by
// d_w * d_x (Q4_K's and Q5_K's sub-blocks of 32 also subtract their min times
// d_x * the activation block's integer sum; Q6_K's sub-blocks of 16 each take
// their own scale). That rounding is the only difference from the float path
// (matmul with ActQuant::None), which multiplies exactly dequantized weights
// with float activations.
//
// Kernels: AVX-512 VNNI (64 multiply-adds per instruction) for decode and
// batches below amx_min_rows (32 rows for Q4_0/Q8_0, 64 for Q4_K/Q5_K), AMX
// int8 tiles (16 x 16 x 32 per instruction) from there (not Q6_K, whose
// scales change every 16 weights: VNNI for every batch); without VNNI (or
// under the cap avx2 of util/cpu_features.h), AVX2 for all five
// (ops/matmul_int8_avx2.h); matmul_int8_reference is their scalar twin.
// Where no kernel fits the type and CPU, int8_matmul_supported() is false
// and callers keep the float path. What is bit-equal to what on each kernel
// is stated once, in matmul.h (MatmulKernel).
#include <cstdint>
#include <limits>
#include <vector>

#include "format/tensor.h"
#include "util/aligned_vector.h"
#include "util/thread_pool.h"

namespace ss {

inline constexpr int kActBlock = 32;

// X [n x cols] rounded in blocks of 32 along cols (cols % 32 == 0):
// q [n x cols], d and sum [n x cols/32] (sum = the block's sum of q).
struct QuantizedActs {
  int n = 0;
  int64_t cols = 0;
  std::vector<int8_t> q;
  std::vector<float> d;
  std::vector<int32_t> sum;
  std::vector<int32_t> sum16;  // the sums of q per 16 [n x cols/16] (Q6_K's sub-blocks)
  std::vector<float> dsum;     // d * sum [n x cols/32] (Q4_K's and Q5_K's mins)
  // Which kernel these activations are laid out for, decided once here and
  // followed by matmul_int8_rows: AMX tiles (kAmxMinRows+ rows, where allowed
  // and present; `packed` filled, and types below their amx_min_rows read q
  // with VNNI) or VNNI (`q_halves` filled).
  bool amx = false;
  // For VNNI: q with each pair of blocks (b, b+1) as [b 0-15, b+1 0-15,
  // b 16-31, b+1 16-31], the order a Q4_0 block pair's low and high nibbles
  // come out of one register, so the GEMV needs no shuffle per weight pair.
  // A last odd block stays as in q. [n x cols]
  std::vector<int8_t> q_halves;
  // For AMX: q repacked per 16 activation rows and block as the tile unit
  // expects (VNNI order: [row group][block][k/4][row][4]); rows past n are 0.
  AlignedVector<int8_t> packed;
  std::vector<float> packed_d;     // d in the same grouping: [row group][block][row]
  std::vector<float> packed_dsum;  // d * sum in the same grouping (for Q4_K's mins)

  int64_t blocks() const { return cols / kActBlock; }
};

// With a pool, rows are split across its threads (batches of 8 rows or more).
void quantize_acts(const float* x, int n, int64_t cols, QuantizedActs& out, ThreadPool* pool = nullptr);

// W's type and row length fit, and this CPU has a kernel for W as it is laid
// out now (AVX2 reads Q4_K, Q5_K and Q6_K only from their interleaved copy).
bool int8_matmul_supported(const TensorView& w);
// What the int8 kernels read of W on this CPU and cap once the runtime has
// laid it out (runtime/kernel_layouts.h): nothing (no kernel: the float
// path), its plain rows, or its interleaved copy (ops/interleave.h). VNNI
// and AVX2: every int8 type interleaved where its shape allows (AMX tiles
// read the interleaved groups too, turned back into rows); plain rows
// otherwise, except the K-quants under AVX2, which then take the float path.
enum class Int8Layout { None, Plain, Interleaved };
Int8Layout int8_layout(const TensorView& w);
// Activation rows from which a batch against W's type takes the AMX int8
// tiles where the CPU has them (VNNI below; Q6_K, whose scales change every
// 16 weights, never). Below, the tiles' per-block scaling and their second
// activation group (16 rows each, two per pass) cost more than the VNNI
// tiles. kernels_bench MatmulInt8Interleaved, 2048 x 2048, one thread on the
// Intel AMX VM, GFLOP/s AMX against VNNI (SINKSTREAM_CPU=avx512), two
// alternating rounds: Q4_0 at 8 rows 149-151 vs 414-473, 16 247-297 vs
// 452-473, 32 535-539 vs 469-493, 64 625-641 vs 503-519, 128 681-702 vs
// 523-539; Q8_0 at 16 270-274 vs 400-417, 32 490-507 vs 466-474, 64 589-613
// vs 485-505; Q4_K at 16 218-223 vs 388-391, 32 422-424 vs 467-469, 64
// 504-512 vs 488-522, 128 555-562 vs 532-548, 256 578-589 vs 546-560; Q5_K at
// 32 384-424 vs 451-456, 64 491-504 vs 501-508, 128 561-568 vs 514-539.
inline constexpr int kAmxMinRows = 32;  // the least of amx_min_rows: where activations are packed for AMX
constexpr int amx_min_rows(GgmlType t) {
  if (t == GgmlType::Q6_K) return std::numeric_limits<int>::max();
  return t == GgmlType::Q4_K || t == GgmlType::Q5_K ? 64 : kAmxMinRows;
}
static_assert(amx_min_rows(GgmlType::Q4_0) == kAmxMinRows && amx_min_rows(GgmlType::Q8_0) == kAmxMinRows &&
              amx_min_rows(GgmlType::Q4_K) >= kAmxMinRows && amx_min_rows(GgmlType::Q5_K) >= kAmxMinRows);
// Whether n activation rows against W take the AMX tiles (else VNNI).
bool int8_uses_amx(const TensorView& w, int n);
// Rows [r0, r1) of Y = X · Wᵀ with X quantized; Y [n x rows]. r0 and r1 are
// multiples of 16 except at the end of W (the AMX path works in 16-row tiles).
void matmul_int8_rows(const TensorView& w, const QuantizedActs& xq, float* y, int64_t r0, int64_t r1);
// Blocks [b0, b0 + count) (count < 0: all from b0; K-quants from a
// super-block, b0 % 8 == 0) of weight rows [rt, rt + 16) of a
// Q4_0/Q8_0/Q4_K/Q5_K matrix as the AMX kernel's int8 A tiles (wq
// [count][16][32]), per-block scales (dw [count][16]) and, for Q4_K/Q5_K,
// mins (mn, the same shape; scale * q - min); rows from `end` on are 0. From
// W's interleaved groups where it has them (whole groups only), else its
// plain rows: the same values either way. Needs AVX-512 VNNI
// (int8_kernels()).
void int8_tile_rows(const TensorView& w, int64_t rt, int64_t end, int8_t* wq, float* dw, float* mn, int64_t b0 = 0,
                    int64_t count = -1);
// Scalar twin of matmul_int8_rows over all rows.
void matmul_int8_reference(const TensorView& w, const QuantizedActs& xq, float* y);

// Which kernels this process uses now: "amx+avx512-vnni", "avx512-vnni",
// "avx-vnni" or "avx2" (the AVX2 tiles, with or without AVX-VNNI) or "none"
// (the CPU, or the cap of util/cpu_features.h, lacks AVX2).
const char* int8_kernels();

}  // namespace ss
