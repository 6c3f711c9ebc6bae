#pragma once
// AVX-512 helpers that turn the interleaved layouts (ops/interleave.h) back
// into rows, for the int8 and bf16 tile kernels: Q4_0, Q8_0, Q4_K, Q5_K; and
// Q5_K's fifth bits, which the VNNI kernels and the batch unpacker add too.
#if defined(__x86_64__) && defined(__GNUC__)
#include <cstdint>

#include "ops/x86_intrinsics.h"

namespace ss {

#define SS_IL_TARGET __attribute__((target("avx512f,avx512bw,f16c"), always_inline)) inline

// Eight 16-row columns of dwords (dword m of a[k]: row m's dword k, as the
// interleaved layouts' 64-byte chunks hold them) transposed to 16 rows of 32
// bytes (rows [16][32]).
SS_IL_TARGET void chunks_to_rows(const __m512i (&a)[8], int8_t* rows) {
  const __m512i rows_0_4 = _mm512_set_epi64(11, 10, 3, 2, 9, 8, 1, 0),
                rows_8_12 = _mm512_set_epi64(15, 14, 7, 6, 13, 12, 5, 4);
  // Per 128-bit lane L: u[i] = row 4L+i's dwords 0-3, u[4+i] its dwords 4-7.
  __m512i u[8];
  for (int h = 0; h < 8; h += 4) {
    const __m512i t0 = _mm512_unpacklo_epi32(a[h], a[h + 1]), t1 = _mm512_unpackhi_epi32(a[h], a[h + 1]);
    const __m512i t2 = _mm512_unpacklo_epi32(a[h + 2], a[h + 3]), t3 = _mm512_unpackhi_epi32(a[h + 2], a[h + 3]);
    u[h] = _mm512_unpacklo_epi64(t0, t2);
    u[h + 1] = _mm512_unpackhi_epi64(t0, t2);
    u[h + 2] = _mm512_unpacklo_epi64(t1, t3);
    u[h + 3] = _mm512_unpackhi_epi64(t1, t3);
  }
  for (int i = 0; i < 4; ++i) {
    const __m512i r04 = _mm512_permutex2var_epi64(u[i], rows_0_4, u[4 + i]);    // rows i, 4+i
    const __m512i r812 = _mm512_permutex2var_epi64(u[i], rows_8_12, u[4 + i]);  // rows 8+i, 12+i
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(rows + i * 32), _mm512_castsi512_si256(r04));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(rows + (4 + i) * 32), _mm512_extracti64x4_epi64(r04, 1));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(rows + (8 + i) * 32), _mm512_castsi512_si256(r812));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(rows + (12 + i) * 32), _mm512_extracti64x4_epi64(r812, 1));
  }
}

// One interleaved Q4_0 block (16 rows x 32 weights, 288 bytes at p) as 16
// rows of 32 signed weights q - 8 in natural order (rows [16][32]) and the
// rows' scales (d [16]): chunk j's low nibbles are weights 4j.., its high
// ones 16+4j...
SS_IL_TARGET void interleaved_block_rows(const uint8_t* p, int8_t* rows, float* d) {
  const __m512i low = _mm512_set1_epi8(0x0F), eight = _mm512_set1_epi8(8);
  _mm512_storeu_ps(d, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))));
  __m512i a[8];
  for (int j = 0; j < 4; ++j) {
    const __m512i v = _mm512_loadu_si512(p + 32 + 64 * j);
    a[j] = _mm512_sub_epi8(_mm512_and_si512(v, low), eight);
    a[4 + j] = _mm512_sub_epi8(_mm512_and_si512(_mm512_srli_epi16(v, 4), low), eight);
  }
  chunks_to_rows(a, rows);
}

// One interleaved Q8_0 block (544 bytes at p) as 16 rows of 32 signed
// weights (rows [16][32]) and their scales (d [16]).
SS_IL_TARGET void interleaved_q8_block_rows(const uint8_t* p, int8_t* rows, float* d) {
  const __m512i bias = _mm512_set1_epi8(static_cast<char>(0x80));
  _mm512_storeu_ps(d, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))));
  __m512i a[8];
  for (int j = 0; j < 8; ++j) a[j] = _mm512_xor_si512(_mm512_loadu_si512(p + 32 + 64 * j), bias);
  chunks_to_rows(a, rows);
}

// Q5_K's fifth bits for 64-byte chunk c of a pair (ops/interleave.h): bit
// 2(c % 4) (low nibble) and 2(c % 4) + 1 (high) of each byte of `top`, the
// pair's top-bit chunk c / 4, added to lo and hi as 16. A byte-mask test
// and a masked add per nibble, where a shift, an AND and an OR were three
// operations (a speed gain is not established: bench/compare_llamacpp.md,
// session 27).
SS_IL_TARGET void add_q5k_fifth_bits(__m512i top, int c, __m512i& lo, __m512i& hi) {
  const __m512i sixteen = _mm512_set1_epi8(16);
  const int at = 2 * (c % 4);
  lo = _mm512_mask_add_epi8(lo, _mm512_test_epi8_mask(top, _mm512_set1_epi8(static_cast<char>(1 << at))), lo, sixteen);
  hi = _mm512_mask_add_epi8(hi, _mm512_test_epi8_mask(top, _mm512_set1_epi8(static_cast<char>(2 << at))), hi, sixteen);
}

// One interleaved Q4_K (kFive: Q5_K) super-block of 16 rows (at p) as its
// eight sub-blocks' rows of 32 weights 0..15 (0..31), rows [8][16][32], with
// scales d * sc and mins dmin * m, dw and mn [8][16] (sub-block j, row m at
// 16j + m).
template <bool kFive>
SS_IL_TARGET void interleaved_k45_superblock_rows(const uint8_t* p, int8_t* rows, float* dw, float* mn) {
  constexpr int kPairBytes = kFive ? 640 : 512;
  const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  const __m512 dmin = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 32)));
  for (int j = 0; j < 8; ++j) {
    const __m512 sc =
        _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 64 + 16 * j))));
    const __m512 m =
        _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 192 + 16 * j))));
    _mm512_storeu_ps(dw + 16 * j, _mm512_mul_ps(d, sc));
    _mm512_storeu_ps(mn + 16 * j, _mm512_mul_ps(dmin, m));
  }
  const __m512i low = _mm512_set1_epi8(0x0F);
  for (int pair = 0; pair < 4; ++pair) {
    const uint8_t* q = p + 320 + kPairBytes * pair;
    __m512i lo[8], hi[8];
    for (int c = 0; c < 8; ++c) {
      const __m512i v = _mm512_loadu_si512(q + 64 * c);
      lo[c] = _mm512_and_si512(v, low);
      hi[c] = _mm512_and_si512(_mm512_srli_epi16(v, 4), low);
      if constexpr (kFive) add_q5k_fifth_bits(_mm512_loadu_si512(q + 512 + 64 * (c / 4)), c, lo[c], hi[c]);
    }
    chunks_to_rows(lo, rows + (2 * pair) * 512);
    chunks_to_rows(hi, rows + (2 * pair + 1) * 512);
  }
}

#undef SS_IL_TARGET

}  // namespace ss
#endif
