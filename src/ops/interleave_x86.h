#pragma once
// AVX-512 helpers for the interleaved Q4_0 layout (ops/interleave.h), shared
// by the int8 and bf16 tile kernels.
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#include <cstdint>

namespace ss {

// One interleaved block (16 rows x 32 weights, 288 bytes at p) as 16 rows of
// 32 signed weights q - 8 in natural order (rows [16][32]) and the rows'
// scales (d [16]): the eight 16-row columns of dwords (chunk j's low
// nibbles = weights 4j.., high = 16+4j..) transposed to 16 rows of eight.
__attribute__((target("avx512f,avx512bw,f16c"), always_inline)) inline void interleaved_block_rows(const uint8_t* p,
                                                                                                   int8_t* rows,
                                                                                                   float* d) {
  const __m512i low = _mm512_set1_epi8(0x0F), eight = _mm512_set1_epi8(8);
  const __m512i rows_0_4 = _mm512_set_epi64(11, 10, 3, 2, 9, 8, 1, 0),
                rows_8_12 = _mm512_set_epi64(15, 14, 7, 6, 13, 12, 5, 4);
  _mm512_storeu_ps(d, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))));
  __m512i a[8];  // dword m of a[k]: row m's dword k
  for (int j = 0; j < 4; ++j) {
    const __m512i v = _mm512_loadu_si512(p + 32 + 64 * j);
    a[j] = _mm512_sub_epi8(_mm512_and_si512(v, low), eight);
    a[4 + j] = _mm512_sub_epi8(_mm512_and_si512(_mm512_srli_epi16(v, 4), low), eight);
  }
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

}  // namespace ss
#endif
