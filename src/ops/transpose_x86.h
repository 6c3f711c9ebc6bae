#pragma once
// 16 x 16 transpose of 32-bit elements in AVX-512 registers, shared by the
// tile kernels (packing bf16 activations, writing tile sums out).
#if defined(__x86_64__) && defined(__GNUC__)
#include "ops/x86_intrinsics.h"

namespace ss {

// r[i] becomes column i: dwords, then qwords within 128-bit lanes, then
// lanes across registers.
__attribute__((target("avx512f"), always_inline)) inline void transpose_16x16_epi32(__m512i r[16]) {
  __m512i t[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
  }
  // u[4i + c], lane L: rows 4i..4i+3 of column 4L + c.
  __m512i u[16];
  for (int i = 0; i < 4; ++i) {
    u[4 * i] = _mm512_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
    u[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
    u[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
    u[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
  }
  for (int c = 0; c < 4; ++c) {
    const __m512i a0 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0x88), a1 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0xDD);
    const __m512i b0 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0x88),
                  b1 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0xDD);
    r[c] = _mm512_shuffle_i32x4(a0, b0, 0x88);
    r[8 + c] = _mm512_shuffle_i32x4(a0, b0, 0xDD);
    r[4 + c] = _mm512_shuffle_i32x4(a1, b1, 0x88);
    r[12 + c] = _mm512_shuffle_i32x4(a1, b1, 0xDD);
  }
}

}  // namespace ss
#endif
