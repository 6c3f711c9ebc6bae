#pragma once
// What the AMX kernels (int8 and bf16 tiles) share: the tile configuration
// layout, and their walk over 32-row weight strips (prefetching the next
// strip, writing the sums out). Whether they may run at all is
// util/cpu_features.h's kCpuAmxInt8 / kCpuAmxBf16.
#include <algorithm>
#include <cstdint>

#include "format/ggml_types.h"
#include "format/tensor.h"
#include "ops/interleave.h"
#include "ops/transpose_x86.h"

namespace ss {

// LDTILECFG's 64-byte operand: palette 1, bytes per row and rows per tile.
struct TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};

  void set(int tile, int row_count, int bytes_per_row) {
    rows[tile] = static_cast<uint8_t>(row_count);
    colsb[tile] = static_cast<uint16_t>(bytes_per_row);
  }
};

// Spreads prefetches of the next 32-row strip of W (after [rt, rt + 32),
// within [.., r1)) over the `steps` steps of the current strip, a few cache
// lines each, into L2, so they arrive while the tiles work.
class StripPrefetch {
 public:
  StripPrefetch(const TensorView& w, int64_t rt, int64_t r1, int64_t steps) {
    const int64_t next_rows = std::min<int64_t>(32, r1 - (rt + 32));
    if (next_rows > 0) {
      const bool il = tiles_read_interleaved(w);
      next_ = il ? rows_begin(w, rt + 32) : w.row(rt + 32);
      // (Interleaved Q4_K/Q5_K rows carry their unpacked scales too.)
      const size_t per_row = il ? interleaved_bytes(w) / static_cast<size_t>(w.ne1) : row_bytes(w.type, w.ne0);
      bytes_ = next_rows * static_cast<int64_t>(per_row);
    }
    lines_per_step_ = (bytes_ / 64 + steps - 1) / steps + 1;
  }
  void step() {
    for (int64_t k = 0; k < lines_per_step_ && fetched_ < bytes_; ++k, fetched_ += 64)
      __builtin_prefetch(next_ + fetched_, 0, 2);  // locality 2: L2 (prefetcht1)
  }

 private:
  const uint8_t* next_ = nullptr;
  int64_t bytes_ = 0, lines_per_step_ = 1, fetched_ = 0;
};

#if defined(__x86_64__) && defined(__GNUC__)
// The float sums of weight strip [rt, rt + 32) against activation groups g
// and g1 (16 rows each; g1 == g when the last group has no partner, whose
// second products are then not written): sums[2 * wt + ag][m][j] for weight
// tile wt, group ag, weight row m, activation j. Into Y [n x rows], rows
// from r1 on left alone: each 16 x 16 tile transposed in registers, then
// 16 weight rows of one activation per (masked) store.
__attribute__((target("avx512f"))) inline void store_strip_sums(const float (*sums)[16][16], int g, int g1, int n,
                                                                int64_t rt, int64_t r1, int64_t rows, float* y) {
  for (int t = 0; t < 4; ++t) {
    if ((t & 1) && g1 == g) continue;
    const int ag = t & 1 ? g1 : g;
    const int na = std::min(16, n - ag * 16);
    const int64_t row0 = rt + (t >> 1) * 16, nr = std::min<int64_t>(16, r1 - row0);
    if (nr <= 0) continue;
    __m512i r[16];
    for (int m = 0; m < 16; ++m) r[m] = _mm512_loadu_si512(sums[t][m]);
    transpose_16x16_epi32(r);
    const __mmask16 keep = static_cast<__mmask16>((1u << nr) - 1);
    for (int j = 0; j < na; ++j) _mm512_mask_storeu_epi32(y + (ag * 16 + j) * rows + row0, keep, r[j]);
  }
}
#endif

}  // namespace ss
