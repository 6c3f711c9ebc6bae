#include "ops/interleave.h"

#include <cstring>

#include "util/check.h"

namespace ss {

namespace {
// Bytes of one group of 16 rows.
int64_t group_bytes(const TensorView& w) {
  return w.type == GgmlType::Q4_K ? w.ne0 / kQkK * kQ4KInterleavedBytes : w.ne0 / 32 * kInterleavedBlockBytes;
}

void interleave_q4_0(const TensorView& w, uint8_t* out) {
  const int64_t nb = w.ne0 / 32, groups = w.ne1 / kInterleaveRows;
  for (int64_t g = 0; g < groups; ++g)
    for (int m = 0; m < kInterleaveRows; ++m) {
      const uint8_t* row = w.row(g * kInterleaveRows + m);
      for (int64_t b = 0; b < nb; ++b) {
        const uint8_t* blk = row + b * kQ4_0Bytes;
        uint8_t* dst = out + (g * nb + b) * kInterleavedBlockBytes;
        std::memcpy(dst + 2 * m, blk, 2);
        for (int j = 0; j < 4; ++j) std::memcpy(dst + 32 + 64 * j + 4 * m, blk + 2 + 4 * j, 4);
      }
    }
}

void interleave_q4_k(const TensorView& w, uint8_t* out) {
  const int64_t ns = w.ne0 / kQkK, groups = w.ne1 / kInterleaveRows;
  for (int64_t g = 0; g < groups; ++g)
    for (int m = 0; m < kInterleaveRows; ++m) {
      const uint8_t* row = w.row(g * kInterleaveRows + m);
      for (int64_t sb = 0; sb < ns; ++sb) {
        const uint8_t* blk = row + sb * kQ4_KBytes;
        uint8_t* dst = out + (g * ns + sb) * kQ4KInterleavedBytes;
        std::memcpy(dst + 2 * m, blk, 2);
        std::memcpy(dst + kQ4KIlDmin + 2 * m, blk + 2, 2);
        uint8_t sc[8], mn[8];
        kquant_scales_mins(blk + 4, sc, mn);
        for (int j = 0; j < 8; ++j) {
          dst[kQ4KIlScales + 16 * j + m] = sc[j];
          dst[kQ4KIlMins + 16 * j + m] = mn[j];
        }
        for (int p = 0; p < 4; ++p)
          for (int c = 0; c < 8; ++c)
            std::memcpy(dst + kQ4KIlNibbles + 64 * (8 * p + c) + 4 * m, blk + 16 + 32 * p + 4 * c, 4);
      }
    }
}
}  // namespace

bool can_interleave(const TensorView& w) {
  if (w.ne1 <= 0 || w.ne1 % kInterleaveRows != 0) return false;
  if (w.type == GgmlType::Q4_0) return w.ne0 % 32 == 0;
  return w.type == GgmlType::Q4_K && w.ne0 % kQkK == 0;
}

size_t interleaved_bytes(const TensorView& w) { return static_cast<size_t>(w.ne1 / kInterleaveRows * group_bytes(w)); }

void interleave(const TensorView& w, uint8_t* out) {
  SS_CHECK(can_interleave(w));
  if (w.type == GgmlType::Q4_K) return interleave_q4_k(w, out);
  interleave_q4_0(w, out);
}

const uint8_t* rows_begin(const TensorView& w, int64_t r) {
  if (w.interleaved == nullptr) return w.row(r);
  SS_CHECK(r % kInterleaveRows == 0);
  return static_cast<const uint8_t*>(w.interleaved) + (r / kInterleaveRows) * group_bytes(w);
}

}  // namespace ss
