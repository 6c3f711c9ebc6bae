#include "ops/matmul_int8_avx2.h"

#include "format/ggml_types.h"
#include "util/check.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define SS_AVX2 __attribute__((target("avx2,fma,f16c")))
#define SS_INT8_AVX_VNNI 0
#include "ops/matmul_int8_avx2_tiles.h"
#undef SS_AVX2
#undef SS_INT8_AVX_VNNI
#endif

namespace ss {

bool int8_avx2_plain_type(GgmlType t) { return t == GgmlType::Q4_0 || t == GgmlType::Q8_0; }

#if defined(__x86_64__) && defined(__GNUC__)

namespace {
__attribute__((target("avx2,fma,f16c"))) int32_t hsum_epi32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  return _mm_cvtsi128_si32(_mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1)));
}
}  // namespace

__attribute__((target("avx2,fma,f16c"))) void quantize_block_avx2(const float* x, int8_t* q, float* d_out,
                                                                  int32_t* half_sums) {
  const __m256 magnitude = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  __m256 v[4], m = _mm256_setzero_ps();
  for (int i = 0; i < 4; ++i) {
    v[i] = _mm256_loadu_ps(x + 8 * i);
    m = _mm256_max_ps(m, _mm256_and_ps(v[i], magnitude));
  }
  __m128 t = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  t = _mm_max_ps(t, _mm_movehl_ps(t, t));
  t = _mm_max_ss(t, _mm_movehdup_ps(t));
  const float d = _mm_cvtss_f32(t) / 127.0f;
  const __m256 id = _mm256_set1_ps(d > 0 ? 1.0f / d : 0.0f);
  __m256i qi[4];  // the default rounding mode: to nearest even, as nearbyint
  for (int i = 0; i < 4; ++i) qi[i] = _mm256_cvtps_epi32(_mm256_mul_ps(v[i], id));
  // packs interleave per 128-bit lane: dwords come out as 0-3 of qi[0], qi[1],
  // qi[2], qi[3], then 4-7 of each.
  const __m256i packed = _mm256_packs_epi16(_mm256_packs_epi32(qi[0], qi[1]), _mm256_packs_epi32(qi[2], qi[3]));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(q),
                      _mm256_permutevar8x32_epi32(packed, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
  *d_out = d;
  half_sums[0] = hsum_epi32(_mm256_add_epi32(qi[0], qi[1]));
  half_sums[1] = hsum_epi32(_mm256_add_epi32(qi[2], qi[3]));
}

void matmul_int8_avx2_rows(const TensorView& w, const QuantizedActs& xq, float* y, int64_t r0, int64_t r1) {
  int8_tiles_rows(w, xq, y, r0, r1);
}

#else  // no x86: never dispatched here (int8_matmul_supported is false)

void matmul_int8_avx2_rows(const TensorView&, const QuantizedActs&, float*, int64_t, int64_t) {
  SS_CHECK(false && "AVX2 int8 kernel on a CPU without AVX2");
}
void quantize_block_avx2(const float*, int8_t*, float*, int32_t*) {
  SS_CHECK(false && "AVX2 rounding on a CPU without AVX2");
}

#endif

}  // namespace ss
