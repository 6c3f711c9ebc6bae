#include "ops/matmul_int8_avx2.h"

#include <algorithm>
#include <cstring>

#include "format/ggml_types.h"
#include "ops/interleave.h"
#include "util/check.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace ss {

bool int8_avx2_type(GgmlType t) { return t == GgmlType::Q4_0 || t == GgmlType::Q8_0; }

#if defined(__x86_64__) && defined(__GNUC__)

namespace {

#define SS_AVX2 __attribute__((target("avx2,fma,f16c")))

template <GgmlType T>
constexpr int64_t kBlockBytes = T == GgmlType::Q4_0 ? 18 : 34;

SS_AVX2 inline float half_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

SS_AVX2 inline float hsum(__m256 v) {
  const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 t = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(t, _mm_movehdup_ps(t)));
}

// R weight rows against NT activation rows from t0, one block of 32 at a
// time: y[k * y_stride + q]. vpmaddubsw multiplies unsigned by signed bytes:
// Q4_0's nibbles (value + 8) go in as they are and the +8 comes back out as
// -8 * the activation block's sum (lane 0); Q8_0 goes in as |w| against x
// with w's sign, so a pair of products (at most 2 * 128 * 127) never
// saturates int16. Each block's integer dot is exact, as in
// matmul_int8_reference; its scale d_w * d_x is applied per lane in floats.
template <GgmlType T, int R, int NT>
SS_AVX2 void avx2_tile(const uint8_t* const* rows, const QuantizedActs& xq, int t0, float* y, int64_t y_stride,
                       int64_t prefetch_ahead) {
  constexpr int64_t BB = kBlockBytes<T>;
  const int64_t nb = xq.blocks(), cols = xq.cols;
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[R][NT];
  for (int q = 0; q < R; ++q)
    for (int k = 0; k < NT; ++k) acc[q][k] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    __m256i xv[NT], bias[NT];
    float dx[NT];
    for (int k = 0; k < NT; ++k) {
      const int64_t i = (t0 + k) * nb + b;
      xv[k] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq.q.data() + (t0 + k) * cols + b * 32));
      dx[k] = xq.d[static_cast<size_t>(i)];
      bias[k] = _mm256_setzero_si256();
      if constexpr (T == GgmlType::Q4_0) bias[k] = _mm256_castsi128_si256(_mm_cvtsi32_si128(-8 * xq.sum[i]));
    }
    for (int q = 0; q < R; ++q) {
      const uint8_t* p = rows[q] + b * BB;
      _mm_prefetch(reinterpret_cast<const char*>(p + prefetch_ahead), _MM_HINT_T0);
      const float dw = half_at(p);
      __m256i wu, wsign;
      if constexpr (T == GgmlType::Q4_0) {
        const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2));
        // Elements 0-15 are the low nibbles, 16-31 the high ones.
        wu = _mm256_and_si256(_mm256_inserti128_si256(_mm256_castsi128_si256(raw), _mm_srli_epi16(raw, 4), 1),
                              _mm256_set1_epi8(0x0F));
        wsign = wu;
      } else {
        wsign = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 2));
        wu = _mm256_sign_epi8(wsign, wsign);
      }
      for (int k = 0; k < NT; ++k) {
        const __m256i xs = T == GgmlType::Q4_0 ? xv[k] : _mm256_sign_epi8(xv[k], wsign);
        const __m256i dp = _mm256_add_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(wu, xs), ones), bias[k]);
        acc[q][k] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dp), _mm256_set1_ps(dw * dx[k]), acc[q][k]);
      }
    }
  }
  for (int q = 0; q < R; ++q)
    for (int k = 0; k < NT; ++k) y[k * y_stride + q] = hsum(acc[q][k]);
}

// 16 vector registers: four weight rows in step for up to two activation
// rows, two for three or four.
template <GgmlType T, int NT>
SS_AVX2 void avx2_rows(const TensorView& w, const QuantizedActs& xq, int t0, float* y, int64_t r0, int64_t r1) {
  constexpr int R = NT <= 2 ? 4 : 2;
  const int64_t rows = w.ne1, rb = static_cast<int64_t>(row_bytes(w.type, w.ne0));
  int64_t r = r0;
  for (; r + R <= r1; r += R) {
    const uint8_t* rs[R];
    for (int q = 0; q < R; ++q) rs[q] = w.row(r + q);
    avx2_tile<T, R, NT>(rs, xq, t0, y + t0 * rows + r, rows, R * rb);
  }
  for (; r < r1; ++r) {
    const uint8_t* rs[1] = {w.row(r)};
    avx2_tile<T, 1, NT>(rs, xq, t0, y + t0 * rows + r, rows, rb);
  }
}

// Rows in strips of 16, each met by every group of activation rows while its
// weights are still in L1 (a batch reads the matrix once).
template <GgmlType T>
SS_AVX2 void avx2_matmul(const TensorView& w, const QuantizedActs& xq, float* y, int64_t r0, int64_t r1) {
  for (int64_t s0 = r0; s0 < r1; s0 += 16) {
    const int64_t s1 = std::min(r1, s0 + 16);
    int t = 0;
    for (; t + 4 <= xq.n; t += 4) avx2_rows<T, 4>(w, xq, t, y, s0, s1);
    switch (xq.n - t) {
      case 3:
        avx2_rows<T, 3>(w, xq, t, y, s0, s1);
        break;
      case 2:
        avx2_rows<T, 2>(w, xq, t, y, s0, s1);
        break;
      case 1:
        avx2_rows<T, 1>(w, xq, t, y, s0, s1);
        break;
      default:
        break;
    }
  }
}
// Q4_0 interleaved 16 rows at a time (ops/interleave.h) against NT
// activation rows from t0: lanes are rows, rows 0-7 in one register and 8-15
// in the other, so a block's 16 dots come out together with no horizontal
// sums, and its 16 scales take two conversions. vpmaddubsw + vpmaddwd sum
// four products per 32-bit lane as vpdpbusd does; a chunk's low- and
// high-nibble products (each pair at most 2 * 15 * 127) are added in int16
// first, one vpmaddwd for both.
template <int NT>
SS_AVX2 void interleaved_q4_0_tile(const uint8_t* group, const QuantizedActs& xq, int t0, float* y, int64_t y_stride) {
  const int64_t nb = xq.blocks(), cols = xq.cols;
  const __m256i low = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1);
  __m256 acc[NT][2];
  for (int k = 0; k < NT; ++k) acc[k][0] = acc[k][1] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* p = group + b * kInterleavedBlockBytes;
    for (int line = 0; line < kInterleavedBlockBytes; line += 64)
      _mm_prefetch(reinterpret_cast<const char*>(p + 8 * kInterleavedBlockBytes + line), _MM_HINT_T0);
    __m256i dot[NT][2];
    for (int k = 0; k < NT; ++k)
      dot[k][0] = dot[k][1] = _mm256_set1_epi32(-8 * xq.sum[static_cast<size_t>((t0 + k) * nb + b)]);
    for (int j = 0; j < 4; ++j) {
      __m256i lo[2], hi[2];
      for (int h = 0; h < 2; ++h) {
        const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 32 + 64 * j + 32 * h));
        lo[h] = _mm256_and_si256(v, low);
        hi[h] = _mm256_and_si256(_mm256_srli_epi16(v, 4), low);
      }
      for (int k = 0; k < NT; ++k) {
        const int8_t* x = xq.q.data() + (t0 + k) * cols + b * kActBlock + 4 * j;
        int32_t xl, xh;
        std::memcpy(&xl, x, 4);
        std::memcpy(&xh, x + 16, 4);
        const __m256i bl = _mm256_set1_epi32(xl), bh = _mm256_set1_epi32(xh);
        for (int h = 0; h < 2; ++h) {
          const __m256i pairs = _mm256_add_epi16(_mm256_maddubs_epi16(lo[h], bl), _mm256_maddubs_epi16(hi[h], bh));
          dot[k][h] = _mm256_add_epi32(dot[k][h], _mm256_madd_epi16(pairs, ones));
        }
      }
    }
    const __m256 dw[2] = {_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))),
                          _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16)))};
    for (int k = 0; k < NT; ++k) {
      const __m256 dx = _mm256_set1_ps(xq.d[static_cast<size_t>((t0 + k) * nb + b)]);
      for (int h = 0; h < 2; ++h)
        acc[k][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot[k][h]), _mm256_mul_ps(dw[h], dx), acc[k][h]);
    }
  }
  for (int k = 0; k < NT; ++k)
    for (int h = 0; h < 2; ++h) _mm256_storeu_ps(y + k * y_stride + 8 * h, acc[k][h]);
}

// Groups of 16 rows, two activation rows per pass (16 vector registers).
SS_AVX2 void interleaved_q4_0_matmul(const TensorView& w, const QuantizedActs& xq, float* y, int64_t r0, int64_t r1) {
  const int64_t rows = w.ne1;
  for (int64_t g = r0 / kInterleaveRows; g * kInterleaveRows < r1; ++g) {
    const uint8_t* group = rows_begin(w, g * kInterleaveRows);
    float* yg = y + g * kInterleaveRows;
    int t = 0;
    for (; t + 2 <= xq.n; t += 2) interleaved_q4_0_tile<2>(group, xq, t, yg + t * rows, rows);
    if (t < xq.n) interleaved_q4_0_tile<1>(group, xq, t, yg + t * rows, rows);
  }
}
#undef SS_AVX2

}  // namespace

void matmul_int8_avx2_rows(const TensorView& w, const QuantizedActs& xq, float* y, int64_t r0, int64_t r1) {
  SS_CHECK(int8_avx2_type(w.type) && xq.cols == w.ne0 && w.ne0 % kActBlock == 0);
  if (w.type == GgmlType::Q4_0 && w.interleaved != nullptr) {
    SS_CHECK(r0 % kInterleaveRows == 0 && (r1 % kInterleaveRows == 0 || r1 == w.ne1));
    return interleaved_q4_0_matmul(w, xq, y, r0, r1);
  }
  if (w.type == GgmlType::Q4_0)
    avx2_matmul<GgmlType::Q4_0>(w, xq, y, r0, r1);
  else
    avx2_matmul<GgmlType::Q8_0>(w, xq, y, r0, r1);
}

#else  // no x86: never dispatched here (int8_matmul_supported is false)

void matmul_int8_avx2_rows(const TensorView&, const QuantizedActs&, float*, int64_t, int64_t) {
  SS_CHECK(false && "AVX2 int8 kernel on a CPU without AVX2");
}

#endif

}  // namespace ss
