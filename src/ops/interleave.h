#pragma once
// Q4_0, Q8_0, Q4_K, Q5_K and Q6_K weights interleaved 16 rows at a time, for the int8 GEMV: one
// 512-bit register then holds four weights of each of 16 rows, so vpdpbusd
// yields 16 row sums in its 16 lanes with no per-row shuffles or horizontal
// adds, and one conversion yields the 16 rows' scales.
//
// Results (matmul.h, MatmulKernel): the AMX paths (int8 and bf16 tiles)
// transpose a group back to rows and give the plain matrix's bits exactly
// (ops/interleave_x86.h); the VNNI GEMV sums a row's blocks
// in another order than on plain rows, so there interleaved and plain agree
// within float rounding, not bit for bit. Without AMX (Zen 4/5, Ice Lake)
// every batch takes VNNI.
//
// Q4_0 [rows x cols] (rows % 16 == 0, cols % 32 == 0; nb = cols / 32), the
// same 18 bytes per 32 weights: group g = rows 16g..16g+15, block b at byte
// (g * nb + b) * 288:
//   [0, 32)    the 16 rows' f16 scales d, row m at 2m;
//   [32, 288)  four chunks j of 64 bytes: 32 + 64j + 4m + i holds byte
//              4j + i of row m's nibbles (low nibble: weight 4j + i, high
//              nibble: weight 16 + 4j + i).
//
// Q4_K (cols % 256 == 0; ns = cols / 256), 148 bytes per 256 weights (the
// file's 144 plus the 6-bit scales and mins unpacked to bytes): super-block s
// of group g at byte (g * ns + s) * 2368:
//   [0, 32)      the rows' f16 d, row m at 2m;   [32, 64) their f16 dmin;
//   [64, 192)    sub-block j's scale of row m at 64 + 16j + m (0..63);
//   [192, 320)   its min at 192 + 16j + m;
//   [320, 2368)  32 chunks of 64 bytes, chunk 8p + c (p = 0..3, c = 0..7) at
//                byte 4m + i holds byte 32p + 4c + i of row m's nibbles: low
//                nibble weight 4c + i of sub-block 2p, high nibble the same
//                weight of sub-block 2p + 1 (the file's own pairing).
//
// Q5_K: as Q4_K, 180 bytes per 256 weights, super-blocks of 2880 bytes whose
// pair p of sub-blocks is 640 bytes at 320 + 640p: the eight nibble chunks,
// then two 64-byte chunks h whose byte 4m + i holds, at bits 2q and 2q + 1,
// the fifth bits of the low and high nibble of chunk 4h + q's byte 4m + i.
//
// Q8_0 (cols % 32 == 0), the file's 34 bytes per 32 weights: block b of
// group g at byte (g * nb + b) * 544: [0, 32) the rows' f16 d, then eight
// 64-byte chunks j whose byte 4m + i holds weight 4j + i of row m plus 128
// (unsigned, for vpdpbusd).
//
// Q6_K (cols % 256 == 0), the file's 210 bytes per 256 weights: super-block
// s of group g at byte (g * ns + s) * 3360, its weights as unsigned 6-bit
// values v (weight = d * scale * (v - 32)):
//   [0, 32)      the rows' f16 d;
//   [32, 288)    sub-block j's (16 weights) int8 scale of row m at 32 + 16j + m;
//   then per p = 0..3, 768 bytes at 288 + 768p, as four runs h = 0..3 of
//   192 bytes at 192h (q6k_il_nibbles, q6k_il_chunk):
//     [0, 64)    nibble chunk h, byte 4m + i: the low four bits of the
//                second weight (below) of chunk 2h (bits 0-3) and of chunk
//                2h + 1 (bits 4-7);
//     [64, 192)  chunks c = 2h, 2h + 1 of 64 bytes, byte 4m + i: weight
//                64p + 4c + i of row m whole (bits 0-5) and the top two bits
//                of its second weight 64p + 32 + 4c + i (bits 6-7).
//   So a chunk's first 64 weights are one AND away, and the second ones, as
//   four times their value, one select of bits 6-7 over the nibble moved to
//   bits 2-5 (the file's layout took 6.5 operations a chunk, this one 4).
//   The runs follow the kernels' reading order, so a super-block is read
//   front to back: with the nibble chunks after all eight chunks (each step
//   jumping 512 bytes forward and back), one-thread Q6_K decode on the Zen 4
//   VM read 85-86% of a plain sweep's speed, in this order 92-93%.
#include <cstddef>
#include <cstdint>

#include "format/ggml_types.h"
#include "format/tensor.h"

namespace ss {

inline constexpr int kInterleaveRows = 16;
inline constexpr int64_t kInterleavedBlockBytes = kInterleaveRows * kQ4_0Bytes;  // 288
inline constexpr int64_t kQ4KInterleavedBytes = 2368;                            // one super-block of 16 rows
inline constexpr int kQ4KIlDmin = 32, kQ4KIlScales = 64, kQ4KIlMins = 192, kQ4KIlNibbles = 320;
inline constexpr int kQ4KIlPairBytes = 512, kQ5KIlPairBytes = 640;
inline constexpr int64_t kQ5KInterleavedBytes = kQ4KIlNibbles + 4 * kQ5KIlPairBytes;  // 2880
inline constexpr int64_t kQ8InterleavedBlockBytes = 544;
inline constexpr int kQ6KIlScales = 32, kQ6KIlPairs = kQ6KIlScales + 16 * kInterleaveRows, kQ6KIlPairBytes = 768;
inline constexpr int64_t kQ6KInterleavedBytes = kQ6KIlPairs + 4 * kQ6KIlPairBytes;  // 3360
// Inside a Q6_K pair (768 bytes): nibble chunk h and chunk c (the layout
// above).
constexpr int q6k_il_nibbles(int h) { return 192 * h; }
constexpr int q6k_il_chunk(int c) { return 192 * (c / 2) + 64 + 64 * (c % 2); }
// The four runs fill a pair exactly.
static_assert(4 * q6k_il_nibbles(1) == kQ6KIlPairBytes && q6k_il_chunk(7) + 64 == kQ6KIlPairBytes);
static_assert(kQ6KInterleavedBytes == 3360 && kQ6KIlPairs == 288);  // the values the layout comment spells out

// How far ahead of the bytes being read the interleaved K-quant GEMV kernels
// (VNNI and AVX2) prefetch into L1 (Q4_K, Q5_K, Q6_K; was one super-block, 2368-3360
// bytes). TinyLlama decode, old and new binaries alternating, three rounds
// each on the Zen 5 VM, median ratio new/old: Q4_K_M 1.21 (1 thread) and
// 1.06 (2 threads), Q5_K_M 1.11 / 1.08, Q6_K 1.29 / 1.15, every round
// faster (4608 and 18432 were slower for Q4_K_M); under the AVX2 cap Q4_K_M
// 1.17 / 1.06, Q5_K_M 1.07 / 1.03, Q6_K 1.09 / 1.00. Q4_0 and Q8_0 keep their
// own distances: the same change there was slower in one such run (Q4_0
// 0.89 / 0.78) and faster in another, and Q8_0 at 4352 or 9216 was 6-10%
// slower than at 2176.
inline constexpr int64_t kKQuantPrefetchAhead = 9216;

// Every line of the kBytes at `at` (a block the kernel will read) into L1,
// one prefetch per 64 bytes from `at`.
template <int64_t kBytes>
__attribute__((always_inline)) inline void prefetch_lines(const uint8_t* at) {
  for (int64_t line = 0; line < kBytes; line += 64) __builtin_prefetch(at + line, 0, 3);
}

// The K-quant GEMV kernels prefetch whole super-blocks, kAhead of them ahead
// (the nearest to kKQuantPrefetchAhead bytes), in kSteps shares spread over
// the one they read: share `step` of the super-block at `ahead` in points
// spaced at most a line apart, so every line of it is touched. Prefetching
// each chunk's address plus a fixed distance missed the scales' lines and a
// misaligned tail (Q6_K: 4.5 of its 52.5 lines a super-block, Q4_K 5 of 37),
// which one thread then waited for. TinyLlama decode on the Zen 5 VM, tok/s
// medians of three alternating runs, 1 / 2 threads: Q4_K_M 46.7 -> 52.7 /
// 82.3 -> 89.5, Q5_K_M 34.4 -> 44.9 / 63.8 -> 76.9, Q6_K 29.1 -> 37.5 /
// 39.9 -> 44.2. kernels_bench DecodeSweep, one thread, share of a plain
// sweep's read rate: Q4_K 0.90-0.95 -> 0.94-0.95, Q5_K 0.76-0.82 -> 0.99-1.01,
// Q6_K 0.73-0.81 -> 0.98-1.07 (Q6_K 2, 4 and 6 super-blocks ahead read
// 0.97-1.13 too; a second stream three times as far into L2, as Q6_K had
// before, 0.83-0.85).
template <int64_t kBytes>
inline constexpr int64_t kSuperBlocksAhead = (kKQuantPrefetchAhead + kBytes / 2) / kBytes;
// kLocality as __builtin_prefetch's: 3 fills L1 (prefetcht0), 2 L2
// (prefetcht1).
template <int64_t kBytes, int kSteps, int kLocality = 3>
__attribute__((always_inline)) inline void prefetch_share(const uint8_t* ahead, int step) {
  constexpr int kPoints = static_cast<int>((kBytes + 64 * kSteps - 1) / (64 * kSteps));
  for (int j = 0; j < kPoints; ++j)
    __builtin_prefetch(ahead + (step * kPoints + j) * kBytes / (kSteps * kPoints), 0, kLocality);
}
// The same into L2 (to_l2) or L1, as a per-CPU choice picks at run time
// (util/cpu_features.h: q5k_prefetch_target(), q6k_prefetch_target()).
template <int64_t kBytes, int kSteps>
__attribute__((always_inline)) inline void prefetch_share_into(bool to_l2, const uint8_t* ahead, int step) {
  if (to_l2)
    prefetch_share<kBytes, kSteps, 2>(ahead, step);
  else
    prefetch_share<kBytes, kSteps>(ahead, step);
}

// W can be interleaved (Q4_0, Q8_0, Q4_K, Q5_K or Q6_K with the shapes above).
bool can_interleave(const TensorView& w);
// Bytes of W's interleaved copy (Q4_0, Q8_0, Q6_K: as many as W's own;
// Q4_K: 148/144 of them, Q5_K: 180/176).
size_t interleaved_bytes(const TensorView& w);
// Writes the interleaved copy of W's rows (can_interleave(w) must hold) to
// dst [interleaved_bytes(w)].
void interleave(const TensorView& w, uint8_t* dst);
// Whether the AMX tile kernels (int8 and bf16) read W's interleaved copy:
// whenever it has one (Q6_K never takes the tiles).
inline bool tiles_read_interleaved(const TensorView& w) { return w.interleaved != nullptr && w.type != GgmlType::Q6_K; }
// Where rows r.. begin in the bytes the kernels read: the interleaved copy
// when there is one (r % 16 == 0: rows r..r+15 then follow contiguously),
// else W's own rows.
const uint8_t* rows_begin(const TensorView& w, int64_t r);

// Where an int8 tile's groups after the first lie: group u at group + u *
// bytes, its results at y + u * rows (adjacent groups: one group's bytes,
// 16; decode reads a range's halves or quarters, that far apart).
struct GroupStep {
  int64_t bytes = 0;
  int64_t rows = 0;
};

// Far-apart streams one core reads in Q4_0/Q8_0 decode: the AVX-512 VNNI
// GEMV's and the AVX2 one's. Row ranges handed to threads come in whole
// multiples of both (ops/matmul.cpp), so no group is left to a one-stream tile.
inline constexpr int kVnniDecodeStreams = 4, kAvx2DecodeStreams = 2;

// Decode's G streams per core (the VNNI and AVX2 int8 GEMVs): rows [r0, r1)
// of an interleaved W (whole groups) in G parts of equal whole groups,
// part(g, step) for each group g of the first part, so that one core reads G
// far-apart parts of W at once (group u of the call at g + u * step). Returns
// where the rest (up to G - 1 last groups) begins.
template <int G, class Part>
int64_t stream_range_parts(const TensorView& w, int64_t r0, int64_t r1, Part&& part) {
  const int64_t groups = (r1 - r0) / kInterleaveRows / G;
  if (groups == 0) return r0;
  const GroupStep step{rows_begin(w, r0 + groups * kInterleaveRows) - rows_begin(w, r0), groups * kInterleaveRows};
  for (int64_t g = r0 / kInterleaveRows; g < r0 / kInterleaveRows + groups; ++g) part(g, step);
  return r0 + G * groups * kInterleaveRows;
}

}  // namespace ss
