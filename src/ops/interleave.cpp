#include "ops/interleave.h"

#include <cstring>

#include "util/check.h"

namespace ss {

bool can_interleave(const TensorView& w) {
  return w.type == GgmlType::Q4_0 && w.ne1 % kInterleaveRows == 0 && w.ne0 % 32 == 0 && w.ne1 > 0;
}

size_t interleaved_bytes(const TensorView& w) {
  return static_cast<size_t>(w.ne1 / kInterleaveRows * (w.ne0 / 32) * kInterleavedBlockBytes);
}

void interleave_q4_0(const TensorView& w, uint8_t* out) {
  SS_CHECK(can_interleave(w));
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

const uint8_t* rows_begin(const TensorView& w, int64_t r) {
  if (w.interleaved == nullptr) return w.row(r);
  SS_CHECK(r % kInterleaveRows == 0);
  return static_cast<const uint8_t*>(w.interleaved) + (r / kInterleaveRows) * (w.ne0 / 32) * kInterleavedBlockBytes;
}

}  // namespace ss
