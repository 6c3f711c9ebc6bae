#pragma once
// The AVX2 int8 tiles (see matmul_int8_avx2.h), written once and compiled
// twice: by matmul_int8_avx2.cpp for AVX2 (vpmaddubsw + vpmaddwd) and by
// matmul_int8_avxvnni.cpp for AVX2 + AVX-VNNI (vpdpbusd on ymm). Each
// includer defines first:
//   SS_AVX2           the target attribute of every function here;
//   SS_INT8_AVX_VNNI  1 where that target has AVX-VNNI, else 0.
// Both compute each block's integer dot exactly, and scale and add the
// blocks in the same order: the same bits.
#if !defined(SS_AVX2) || !defined(SS_INT8_AVX_VNNI)
#error "define SS_AVX2 and SS_INT8_AVX_VNNI before including matmul_int8_avx2_tiles.h"
#endif
#include <algorithm>
#include <cstring>

#include "format/ggml_types.h"
#include "ops/interleave.h"
#include "ops/matmul_int8.h"
#include "ops/x86_intrinsics.h"
#include "util/check.h"

namespace ss {
namespace {

constexpr bool kAvxVnni = SS_INT8_AVX_VNNI != 0;
// Activation rows per pass over a group in batches: four with AVX-VNNI,
// whose sums need no int16 registers beside the int32 ones (TinyLlama
// prefill 512, two threads, two alternating rounds on the Zen 5 VM capped to
// avxvnni: Q4_0 +16-19%, Q8_0 +14-21%, Q4_K_M +13-21%, Q5_K_M +18-28%,
// Q6_K -2%/+15%); two on AVX2, where four spill (Q4_0 -8% and -21%).
constexpr int kBatchRows = kAvxVnni ? 4 : 2;
template <GgmlType T>
constexpr int64_t kBlockBytes = T == GgmlType::Q4_0 ? 18 : 34;

SS_AVX2 inline float half_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

// Four activations (one 32-bit lane) in every lane.
SS_AVX2 inline __m256i broadcast4(const int8_t* x) {
  int32_t v;
  std::memcpy(&v, x, 4);
  return _mm256_set1_epi32(v);
}

// acc + in each 32-bit lane the four products of w's unsigned bytes and x's
// signed ones, exactly: one vpdpbusd with AVX-VNNI; else vpmaddubsw +
// vpmaddwd, exact only where no pair of products saturates int16 (each
// caller says why its pairs cannot).
SS_AVX2 inline __m256i dot4(__m256i acc, __m256i w, __m256i x) {
#if SS_INT8_AVX_VNNI
  return _mm256_dpbusd_avx_epi32(acc, w, x);
#else
  return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(w, x), _mm256_set1_epi16(1)));
#endif
}

// Eight unsigned / signed bytes, eight f16 values as eight floats.
SS_AVX2 inline __m256 floats_u8(const uint8_t* p) {
  return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
}
SS_AVX2 inline __m256 floats_i8(const uint8_t* p) {
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
}
SS_AVX2 inline __m256 floats_f16(const uint8_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

// An empty asm that claims to change v: GCC reassociates a chain of integer
// adds into a tree, hoisting every product of a block first, and spills
// them (the Q4_0 pair tile kept 10 sums on the stack); this keeps one running
// sum per register. Pinned int16 stages under the AVX2 cap on the Zen 4 VM,
// TinyLlama prefill 256 at one thread, three alternating runs, tok/s: Q4_K_M
// 56.3 / 66.2 / 60.4 -> 67.0 / 69.1 / 62.0, Q5_K_M 49.7 / 50.9 / 53.2 ->
// 54.0 / 54.9 / 55.7, Q8_0 (batch tiles) 56.5 / 55.4 / 55.7 -> 58.0 / 58.8 /
// 56.7.
SS_AVX2 inline void pin(__m256i& v) { asm("" : "+x"(v)); }

// Every register of an [A][B] block of accumulators set to zero.
template <class V, int A, int B>
SS_AVX2 inline void zero(V (&v)[A][B]) {
  for (int a = 0; a < A; ++a)
    for (int b = 0; b < B; ++b) v[a][b] = V{};
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
        const __m256i dp = dot4(bias[k], wu, xs);
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
// Where block b of each of a tile's G groups starts (p[u]), with a software
// prefetch into L1 of every line kAhead blocks ahead (one group: the
// one-stream tiles) or kPairAhead ahead in both (two groups: decode's two
// streams; 0: none).
template <int G, int64_t kBytes, int kAhead, int kPairAhead>
SS_AVX2 inline void block_starts(const uint8_t* group, GroupStep step, int64_t b, const uint8_t* (&p)[G]) {
  constexpr int kDistance = G == 1 ? kAhead : kPairAhead;
  for (int u = 0; u < G; ++u) {
    p[u] = group + u * step.bytes + b * kBytes;
    if constexpr (kDistance > 0) prefetch_lines<kBytes>(p[u] + kDistance * kBytes);
  }
}

// The Q4_0/Q8_0 tiles' scaling step for block b: group u's integer dots
// dot[u * NT + k] times its 16 rows' d (f16 at p[u]) and activation row
// t0 + k's d, into acc[u * NT + k].
template <int NT, int G>
SS_AVX2 inline void add_scaled_blocks(__m256 (&acc)[G * NT][2], const __m256i (&dot)[G * NT][2],
                                      const uint8_t* const (&p)[G], const QuantizedActs& xq, int t0, int64_t b) {
  const int64_t nb = xq.blocks();
  for (int u = 0; u < G; ++u) {
    const __m256 dw[2] = {floats_f16(p[u]), floats_f16(p[u] + 16)};
    for (int k = 0; k < NT; ++k) {
      const __m256 dx = _mm256_set1_ps(xq.d[static_cast<size_t>((t0 + k) * nb + b)]);
      for (int h = 0; h < 2; ++h)
        acc[u * NT + k][h] =
            _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot[u * NT + k][h]), _mm256_mul_ps(dw[h], dx), acc[u * NT + k][h]);
    }
  }
}

// Their results: group u's 16 rows for activation row k at y + u *
// step.rows + k * y_stride.
template <int NT, int G>
SS_AVX2 inline void store_groups(const __m256 (&acc)[G * NT][2], float* y, int64_t y_stride, GroupStep step) {
  for (int u = 0; u < G; ++u)
    for (int k = 0; k < NT; ++k)
      for (int h = 0; h < 2; ++h) _mm256_storeu_ps(y + u * step.rows + k * y_stride + 8 * h, acc[u * NT + k][h]);
}

// Q4_0 interleaved 16 rows at a time (ops/interleave.h) against NT
// activation rows from t0: lanes are rows, rows 0-7 in one register and 8-15
// in the other, so a block's 16 dots come out together with no horizontal
// sums, and its 16 scales take two conversions. Without AVX-VNNI,
// vpmaddubsw's pairs (each at most 2 * 15 * 127) of all eight nibble chunks
// of a block add up in int16 (8 * 3810 < 32768), pinned (pin()), and one
// vpmaddwd per half turns them into the int32 dots (one per chunk before:
// TinyLlama prefill 256 under the AVX2 cap on the Zen 4 VM, one thread,
// alternating runs: 76.6 / 87.0 / 82.0 -> 102.8 / 100.5 / 79.0 tok/s;
// decode level). With AVX-VNNI, two vpdpbusd per chunk.
template <int NT, int G = 1>
SS_AVX2 void interleaved_q4_0_tile(const uint8_t* group, const QuantizedActs& xq, int t0, float* y, int64_t y_stride,
                                   GroupStep step = {}) {
  const int64_t nb = xq.blocks(), cols = xq.cols;
  const __m256i low = _mm256_set1_epi8(0x0F);
  __m256 acc[G * NT][2];  // [group u * NT + activation row k][row half]
  zero(acc);
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* p[G];
    block_starts<G, kInterleavedBlockBytes, 8, 16>(group, step, b, p);
    __m256i dot[G * NT][2];  // int32 lanes with AVX-VNNI, else int16 pairs
    if constexpr (kAvxVnni) {
      for (int k = 0; k < NT; ++k)
        for (int u = 0; u < G; ++u)
          dot[u * NT + k][0] = dot[u * NT + k][1] =
              _mm256_set1_epi32(-8 * xq.sum[static_cast<size_t>((t0 + k) * nb + b)]);
    } else {
      zero(dot);
    }
    for (int j = 0; j < 4; ++j) {
      for (int u = 0; u < G; ++u) {
        __m256i lo[2], hi[2];
        for (int h = 0; h < 2; ++h) {
          const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p[u] + 32 + 64 * j + 32 * h));
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
            if constexpr (kAvxVnni) {
              dot[u * NT + k][h] = dot4(dot4(dot[u * NT + k][h], lo[h], bl), hi[h], bh);
            } else {
              dot[u * NT + k][h] =
                  _mm256_add_epi16(dot[u * NT + k][h],
                                   _mm256_add_epi16(_mm256_maddubs_epi16(lo[h], bl), _mm256_maddubs_epi16(hi[h], bh)));
              pin(dot[u * NT + k][h]);
            }
          }
        }
      }
    }
    if constexpr (!kAvxVnni) {
      const __m256i ones = _mm256_set1_epi16(1);
      for (int k = 0; k < NT; ++k) {
        const __m256i bias = _mm256_set1_epi32(-8 * xq.sum[static_cast<size_t>((t0 + k) * nb + b)]);
        for (int u = 0; u < G; ++u)
          for (int h = 0; h < 2; ++h)
            dot[u * NT + k][h] = _mm256_add_epi32(bias, _mm256_madd_epi16(dot[u * NT + k][h], ones));
      }
    }
    add_scaled_blocks<NT, G>(acc, dot, p, xq, t0, b);
  }
  store_groups<NT, G>(acc, y, y_stride, step);
}

// The interleaved layouts put rows 0-7 of a 64-byte chunk in its first 32
// bytes and rows 8-15 in the other: one register per half-group, lanes =
// rows. The K-quant tiles take H = 2 halves for one activation row and H = 1
// (called once per half) for two, so that their accumulators fit in 16
// vector registers; a half's second pass reads the group from L1/L2.

// Q8_0 interleaved (ops/interleave.h: weights stored + 128) against NT
// activation rows from t0: per block, eight chunks of four weights per row
// against four activations each. vpmaddubsw takes |w| against x with w's
// sign, so a pair of products (at most 2 * 128 * 127) never saturates int16.
// With AVX-VNNI, vpdpbusd takes the stored w + 128 as it is, and the 128
// comes back out as -128 * the activation block's sum.
template <int NT, int G = 1>
SS_AVX2 void interleaved_q8_0_tile(const uint8_t* group, const QuantizedActs& xq, int t0, float* y, int64_t y_stride,
                                   GroupStep step = {}) {
  const int64_t nb = xq.blocks(), cols = xq.cols;
  const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80)), ones = _mm256_set1_epi16(1);
  __m256 acc[G * NT][2];  // [group u * NT + activation row k][row half]
  zero(acc);
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* p[G];
    block_starts<G, kQ8InterleavedBlockBytes, 4, 0>(group, step, b, p);
    __m256i dot[G * NT][2];
    if constexpr (kAvxVnni) {
      for (int k = 0; k < NT; ++k)
        for (int u = 0; u < G; ++u)
          dot[u * NT + k][0] = dot[u * NT + k][1] =
              _mm256_set1_epi32(-128 * xq.sum[static_cast<size_t>((t0 + k) * nb + b)]);
    } else {
      zero(dot);
    }
    for (int j = 0; j < 8; ++j) {
      if constexpr (kAvxVnni) {
        for (int u = 0; u < G; ++u) {
          __m256i wb[2];
          for (int h = 0; h < 2; ++h)
            wb[h] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p[u] + 32 + 64 * j + 32 * h));
          for (int k = 0; k < NT; ++k) {
            const __m256i xb = broadcast4(xq.q.data() + (t0 + k) * cols + b * kActBlock + 4 * j);
            for (int h = 0; h < 2; ++h) dot[u * NT + k][h] = dot4(dot[u * NT + k][h], wb[h], xb);
          }
        }
        continue;
      }
      for (int u = 0; u < G; ++u) {
        __m256i ws[2], wa[2];
        for (int h = 0; h < 2; ++h) {
          ws[h] =
              _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p[u] + 32 + 64 * j + 32 * h)), flip);
          wa[h] = _mm256_abs_epi8(ws[h]);  // -128 stays 0x80: 128 unsigned
        }
        for (int k = 0; k < NT; ++k) {
          const __m256i xb = broadcast4(xq.q.data() + (t0 + k) * cols + b * kActBlock + 4 * j);
          for (int h = 0; h < 2; ++h) {
            dot[u * NT + k][h] = _mm256_add_epi32(
                dot[u * NT + k][h], _mm256_madd_epi16(_mm256_maddubs_epi16(wa[h], _mm256_sign_epi8(xb, ws[h])), ones));
            // Not in the decode pair tile: pinned there, TinyLlama decode at one
            // thread read 93-94% of the paired sweep against 96-98% (three
            // alternating runs, AVX2 cap, Zen 4 VM).
            if constexpr (G == 1) pin(dot[u * NT + k][h]);
          }
        }
      }
    }
    add_scaled_blocks<NT, G>(acc, dot, p, xq, t0, b);
  }
  store_groups<NT, G>(acc, y, y_stride, step);
}

// The K-quant tiles' scaling step: two sub-blocks' integer dots (dlo
// against activation block a0, dhi against a0 + 1, a0 counted within a row)
// times their per-row scales sc_lo[h], sc_hi[h] (the super-block's d
// included) and the activation blocks' d, added to acc. Going straight into
// the rows' float sums leaves no other float state live across a
// super-block: 16 ymm registers are few.
template <int NT, int H>
SS_AVX2 inline void add_scaled_pair(__m256 (&acc)[NT][H], const __m256i (&dlo)[NT][H], const __m256i (&dhi)[NT][H],
                                    const __m256 (&sc_lo)[H], const __m256 (&sc_hi)[H], const QuantizedActs& xq, int t0,
                                    int64_t a0) {
  const int64_t nb = xq.blocks();
  for (int h = 0; h < H; ++h)
    for (int k = 0; k < NT; ++k) {
      const size_t a = static_cast<size_t>((t0 + k) * nb + a0);
      acc[k][h] =
          _mm256_fmadd_ps(_mm256_cvtepi32_ps(dlo[k][h]), _mm256_mul_ps(sc_lo[h], _mm256_set1_ps(xq.d[a])), acc[k][h]);
      acc[k][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dhi[k][h]), _mm256_mul_ps(sc_hi[h], _mm256_set1_ps(xq.d[a + 1])),
                                  acc[k][h]);
    }
}

// Q4_K (Q5_K: kFive) interleaved against NT activation rows from t0, halves
// h0..h0+H-1 of the group. Per pair p of sub-blocks, chunk c's low nibbles
// (sub-block 2p, 0..15; Q5_K with its fifth bit, 0..31) meet activations
// 64p + 4c.., its high nibbles (2p + 1) 64p + 32 + 4c..; vpmaddubsw pairs
// (at most 2 * 31 * 127) add up in int16 over kRun chunks before one
// vpmaddwd; with AVX-VNNI each chunk goes straight into the int32 sums.
// Each sub-block's 8 integer dots take d * their scales times the
// activation block's d; dmin * the mins times the activation blocks' d * sum
// come off first.
template <bool kFive, int NT, int H>
SS_AVX2 void interleaved_k45_tile(const uint8_t* group, const QuantizedActs& xq, int t0, float* y, int64_t y_stride,
                                  int h0) {
  constexpr int64_t kSuperBytes = kFive ? kQ5KInterleavedBytes : kQ4KInterleavedBytes;
  constexpr int kPairBytes = kFive ? kQ5KIlPairBytes : kQ4KIlPairBytes;
  // Chunks whose vpmaddubsw pairs add up in int16 before one vpmaddwd:
  // 4 * 2 * 31 * 127 and 8 * 2 * 15 * 127 < 32768. AVX-VNNI has no int16
  // stage, so all eight chunks are one run.
  constexpr int kRun = kAvxVnni || !kFive ? 8 : 4;
  const int64_t nb = xq.blocks(), cols = xq.cols, ns = cols / kQkK;
  const __m256i low = _mm256_set1_epi8(0x0F), fifth = _mm256_set1_epi8(0x10), ones = _mm256_set1_epi16(1);
  __m256 acc[NT][H];
  zero(acc);
  for (int64_t sb = 0; sb < ns; ++sb) {
    const uint8_t* p = group + sb * kSuperBytes;
    __m256 d[H];
    for (int h = 0; h < H; ++h) {
      d[h] = floats_f16(p + 16 * (h0 + h));
      const __m256 dmin = floats_f16(p + kQ4KIlDmin + 16 * (h0 + h));
      for (int j = 0; j < 8; ++j) {
        const __m256 mn = _mm256_mul_ps(dmin, floats_u8(p + kQ4KIlMins + 16 * j + 8 * (h0 + h)));
        for (int k = 0; k < NT; ++k) {
          const size_t a = static_cast<size_t>((t0 + k) * nb + sb * 8 + j);
          acc[k][h] = _mm256_fnmadd_ps(mn, _mm256_set1_ps(xq.dsum[a]), acc[k][h]);
        }
      }
    }
    for (int pair = 0; pair < 4; ++pair) {
      const uint8_t* pp = p + kQ4KIlNibbles + kPairBytes * pair;
      __m256i dlo[NT][H], dhi[NT][H];
      zero(dlo);
      zero(dhi);
      for (int c0 = 0; c0 < 8; c0 += kRun) {
        __m256i slo[NT][H], shi[NT][H];  // the int16 stage: AVX2 only
        if constexpr (!kAvxVnni) {
          zero(slo);
          zero(shi);
        }
#pragma GCC unroll 8
        for (int c = c0; c < c0 + kRun; ++c) {
          const uint8_t* chunk = pp + 64 * c;
          if (h0 == 0 && t0 == 0 && c % 4 == 0)  // as the VNNI tiles
            prefetch_share<kSuperBytes, 8>(p + kSuperBlocksAhead<kSuperBytes> * kSuperBytes, 2 * pair + c / 4);
          for (int h = 0; h < H; ++h) {
            const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(chunk + 32 * (h0 + h)));
            __m256i lo = _mm256_and_si256(v, low), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low);
            if constexpr (kFive) {
              const __m256i bits =
                  _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pp + 512 + 64 * (c / 4) + 32 * (h0 + h)));
              const int at = 2 * (c % 4);  // the low nibble's fifth bit; the high one's at + 1
              const __m256i lo5 = at <= 4 ? _mm256_sll_epi16(bits, _mm_cvtsi32_si128(4 - at))
                                          : _mm256_srl_epi16(bits, _mm_cvtsi32_si128(at - 4));
              const __m256i hi5 = at + 1 <= 4 ? _mm256_sll_epi16(bits, _mm_cvtsi32_si128(3 - at))
                                              : _mm256_srl_epi16(bits, _mm_cvtsi32_si128(at - 3));
              lo = _mm256_or_si256(lo, _mm256_and_si256(lo5, fifth));
              hi = _mm256_or_si256(hi, _mm256_and_si256(hi5, fifth));
            }
            for (int k = 0; k < NT; ++k) {
              const int8_t* x = xq.q.data() + (t0 + k) * cols + sb * kQkK + 64 * pair + 4 * c;
              if constexpr (kAvxVnni) {
                dlo[k][h] = dot4(dlo[k][h], lo, broadcast4(x));
                dhi[k][h] = dot4(dhi[k][h], hi, broadcast4(x + 32));
              } else {
                slo[k][h] = _mm256_add_epi16(slo[k][h], _mm256_maddubs_epi16(lo, broadcast4(x)));
                shi[k][h] = _mm256_add_epi16(shi[k][h], _mm256_maddubs_epi16(hi, broadcast4(x + 32)));
                pin(slo[k][h]);
                pin(shi[k][h]);
              }
            }
          }
        }
        if constexpr (!kAvxVnni)
          for (int k = 0; k < NT; ++k)
            for (int h = 0; h < H; ++h) {
              dlo[k][h] = _mm256_add_epi32(dlo[k][h], _mm256_madd_epi16(slo[k][h], ones));
              dhi[k][h] = _mm256_add_epi32(dhi[k][h], _mm256_madd_epi16(shi[k][h], ones));
            }
      }
      __m256 sc_lo[H], sc_hi[H];
      for (int h = 0; h < H; ++h) {
        sc_lo[h] = _mm256_mul_ps(d[h], floats_u8(p + kQ4KIlScales + 32 * pair + 8 * (h0 + h)));
        sc_hi[h] = _mm256_mul_ps(d[h], floats_u8(p + kQ4KIlScales + 32 * pair + 16 + 8 * (h0 + h)));
      }
      add_scaled_pair(acc, dlo, dhi, sc_lo, sc_hi, xq, t0, sb * 8 + 2 * pair);
    }
  }
  for (int k = 0; k < NT; ++k)
    for (int h = 0; h < H; ++h) _mm256_storeu_ps(y + k * y_stride + 8 * (h0 + h), acc[k][h]);
}

// Q6_K interleaved against NT activation rows from t0, halves h0..h0+H-1.
// Per pair p, chunk c holds the unsigned 6-bit weights of 64p + 4c.. (low:
// AND 0x3F) and the top two bits of those of 64p + 32 + 4c.. (high), whose
// low four come from high-nibble chunk c / 2; chunks 4q..4q+3 cover sub-blocks 4p + q (low) and
// 4p + 2 + q (high) of 16 weights, whose integer sums start at -32 times their
// activations' sum (the offset of v - 32) and take d * their int8 scales
// times the activation block's d. vpmaddubsw pairs (at most 2 * 63 * 127) of two
// chunks add up in int16 before one vpmaddwd; with AVX-VNNI each chunk goes
// straight into the int32 sums.
template <int NT, int H>
SS_AVX2 void interleaved_q6k_tile(const uint8_t* group, const QuantizedActs& xq, int t0, float* y, int64_t y_stride,
                                  int h0) {
  const int64_t nb = xq.blocks(), cols = xq.cols, ns = cols / kQkK;
  const __m256i six = _mm256_set1_epi8(0x3F), low = _mm256_set1_epi8(0x0F), top = _mm256_set1_epi8(0x30),
                ones = _mm256_set1_epi16(1);
  __m256 acc[NT][H];
  zero(acc);
  for (int64_t sb = 0; sb < ns; ++sb) {
    const uint8_t* blk = group + sb * kQ6KInterleavedBytes;
    __m256 d[H];
    for (int h = 0; h < H; ++h) d[h] = floats_f16(blk + 16 * (h0 + h));
    for (int pair = 0; pair < 4; ++pair) {
      const uint8_t* p = blk + kQ6KIlPairs + kQ6KIlPairBytes * pair;
      // Unrolled, every offset below is a constant (q6k_il_chunk): on the
      // read-order layout (interleave.h) the rolled loop ran slower than on
      // the old one (kernels_bench 2048 x 2048 x 16 under the AVX2 cap, Zen 4
      // VM: 88-89 -> 80-81 GFLOP/s); unrolled 94-96. TinyLlama Q6_K against
      // the old layout and loop: prefill 52.3-53.0 -> 56.9-57.3 tok/s, decode
      // 79-80% -> 82-86% of the paired sweep.
#pragma GCC unroll 2
      for (int q = 0; q < 2; ++q) {
        __m256i dlo[NT][H], dhi[NT][H];
        for (int k = 0; k < NT; ++k) {
          const int32_t* s16 = xq.sum16.data() + (t0 + k) * 2 * nb + sb * 16 + 4 * pair + q;
          for (int h = 0; h < H; ++h) {
            dlo[k][h] = _mm256_set1_epi32(-32 * s16[0]);
            dhi[k][h] = _mm256_set1_epi32(-32 * s16[2]);
          }
        }
#pragma GCC unroll 2
        for (int h2 = 0; h2 < 2; ++h2) {
          const int hh = 2 * q + h2;
          if (h0 == 0 && t0 == 0)
            prefetch_share<kQ6KInterleavedBytes, 16>(
                blk + kSuperBlocksAhead<kQ6KInterleavedBytes> * kQ6KInterleavedBytes, 4 * pair + hh);
          for (int h = 0; h < H; ++h) {
            const __m256i nib =
                _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + q6k_il_nibbles(hh) + 32 * (h0 + h)));
            __m256i slo[NT], shi[NT];  // the int16 stage: AVX2 only
            for (int half = 0; half < 2; ++half) {
              const int c = 2 * hh + half;
              const __m256i v =
                  _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + q6k_il_chunk(c) + 32 * (h0 + h)));
              // The high weight's top bits (6-7) to bits 4-5, over its nibble:
              // bits 0-3 (chunk 2hh) or 4-7 (chunk 2hh + 1) of `nib`.
              const __m256i wl = _mm256_and_si256(v, six);
              const __m256i wh = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v, 2), top),
                                                 _mm256_and_si256(half == 0 ? nib : _mm256_srli_epi16(nib, 4), low));
              for (int k = 0; k < NT; ++k) {
                const int8_t* x = xq.q.data() + (t0 + k) * cols + sb * kQkK + 64 * pair + 4 * c;
                if constexpr (kAvxVnni) {
                  dlo[k][h] = dot4(dlo[k][h], wl, broadcast4(x));
                  dhi[k][h] = dot4(dhi[k][h], wh, broadcast4(x + 32));
                } else {
                  const __m256i pl = _mm256_maddubs_epi16(wl, broadcast4(x));
                  const __m256i ph = _mm256_maddubs_epi16(wh, broadcast4(x + 32));
                  slo[k] = half == 0 ? pl : _mm256_add_epi16(slo[k], pl);
                  shi[k] = half == 0 ? ph : _mm256_add_epi16(shi[k], ph);
                }
              }
            }
            if constexpr (!kAvxVnni)
              for (int k = 0; k < NT; ++k) {
                dlo[k][h] = _mm256_add_epi32(dlo[k][h], _mm256_madd_epi16(slo[k], ones));
                dhi[k][h] = _mm256_add_epi32(dhi[k][h], _mm256_madd_epi16(shi[k], ones));
              }
          }
        }
        __m256 sc_lo[H], sc_hi[H];
        for (int h = 0; h < H; ++h) {
          sc_lo[h] = _mm256_mul_ps(d[h], floats_i8(blk + kQ6KIlScales + 16 * (4 * pair + q) + 8 * (h0 + h)));
          sc_hi[h] = _mm256_mul_ps(d[h], floats_i8(blk + kQ6KIlScales + 16 * (4 * pair + 2 + q) + 8 * (h0 + h)));
        }
        add_scaled_pair(acc, dlo, dhi, sc_lo, sc_hi, xq, t0, sb * 8 + 2 * pair);
      }
    }
  }
  for (int k = 0; k < NT; ++k)
    for (int h = 0; h < H; ++h) _mm256_storeu_ps(y + k * y_stride + 8 * (h0 + h), acc[k][h]);
}

// A K-quant tile over a whole group: both halves at once for one activation
// row, one half at a time for two.
template <GgmlType T, int NT>
SS_AVX2 void kquant_group(const uint8_t* group, const QuantizedActs& xq, int t0, float* y, int64_t y_stride) {
  constexpr int H = NT == 1 ? 2 : 1;
  for (int h0 = 0; h0 < 2; h0 += H) {
    if constexpr (T == GgmlType::Q6_K)
      interleaved_q6k_tile<NT, H>(group, xq, t0, y, y_stride, h0);
    else
      interleaved_k45_tile<T == GgmlType::Q5_K, NT, H>(group, xq, t0, y, y_stride, h0);
  }
}

// Activation rows [0, n) kMax at a time (4 or 2), then two, then the last
// one alone: tile.template operator()<NT>(t) for rows [t, t + NT).
template <int kMax = 2, typename Tile>
__attribute__((always_inline)) inline void in_row_steps(int n, Tile& tile) {
  int t = 0;
  if constexpr (kMax >= 4)
    for (; t + 4 <= n; t += 4) tile.template operator()<4>(t);
  for (; t + 2 <= n; t += 2) tile.template operator()<2>(t);
  if (t < n) tile.template operator()<1>(t);
}

// Groups of 16 rows of an interleaved matrix, two activation rows per pass
// (16 vector registers), each group met by every activation row while its
// bytes are still in L1/L2.
template <GgmlType T>
SS_AVX2 void interleaved_matmul(const TensorView& w, const QuantizedActs& xq, float* y, int64_t r0, int64_t r1) {
  const int64_t rows = w.ne1;
  if constexpr (T == GgmlType::Q4_0 || T == GgmlType::Q8_0) {
    if (xq.n < 4) {
      // Decode: the range's halves side by side, two DRAM streams per core
      // (the VNNI kernels read four, ops/matmul_int8.cpp; here four Q8_0
      // streams read 0.78-0.88 of the probe in kernels_bench DecodeSweep
      // against two's 0.71-0.78, but TinyLlama Q8_0 decode under the AVX2 cap
      // was not faster: median ratio 0.95, five alternating runs at one
      // thread). TinyLlama decode on the Zen 5 VM capped to AVX2, medians of
      // five alternating runs, tok/s: Q8_0 18.4 -> 21.1 (one thread), 35.7 ->
      // 40.7 (two); Q4_0 34.4 -> 40.6, 63.6 -> 69.0; higher in every pair.
      // Q8_0's pair tiles issue no software prefetch; Q4_0's prefetch both
      // streams 16 blocks ahead, as the VNNI pair tile did: 52.5 -> 55.2 (one
      // thread, four alternating runs), 61.4 -> 64.0 (two, three runs), higher
      // in each.
      r0 = stream_range_parts<kAvx2DecodeStreams>(w, r0, r1, [&](int64_t g, GroupStep step) {
        const uint8_t* group = rows_begin(w, g * kInterleaveRows);
        float* yg = y + g * kInterleaveRows;
        auto pair = [&]<int NT>(int t) {
          if constexpr (T == GgmlType::Q4_0)
            interleaved_q4_0_tile<NT, 2>(group, xq, t, yg + t * rows, rows, step);
          else
            interleaved_q8_0_tile<NT, 2>(group, xq, t, yg + t * rows, rows, step);
        };
        in_row_steps(xq.n, pair);
      });
    }
  }
  for (int64_t g = r0 / kInterleaveRows; g * kInterleaveRows < r1; ++g) {
    const uint8_t* group = rows_begin(w, g * kInterleaveRows);
    float* yg = y + g * kInterleaveRows;
    auto tile = [&]<int NT>(int t) {
      if constexpr (T == GgmlType::Q4_0)
        interleaved_q4_0_tile<NT>(group, xq, t, yg + t * rows, rows);
      else if constexpr (T == GgmlType::Q8_0)
        interleaved_q8_0_tile<NT>(group, xq, t, yg + t * rows, rows);
      else
        kquant_group<T, NT>(group, xq, t, yg + t * rows, rows);
    };
    in_row_steps<kBatchRows>(xq.n, tile);
  }
}

// Rows [r0, r1) of Y = X · Wᵀ (matmul_int8_avx2_rows).
SS_AVX2 void int8_tiles_rows(const TensorView& w, const QuantizedActs& xq, float* y, int64_t r0, int64_t r1) {
  SS_CHECK(xq.cols == w.ne0 && w.ne0 % kActBlock == 0);
  if (w.interleaved != nullptr) {
    SS_CHECK(r0 % kInterleaveRows == 0 && (r1 % kInterleaveRows == 0 || r1 == w.ne1));
    switch (w.type) {
      case GgmlType::Q4_0:
        return interleaved_matmul<GgmlType::Q4_0>(w, xq, y, r0, r1);
      case GgmlType::Q8_0:
        return interleaved_matmul<GgmlType::Q8_0>(w, xq, y, r0, r1);
      case GgmlType::Q4_K:
        return interleaved_matmul<GgmlType::Q4_K>(w, xq, y, r0, r1);
      case GgmlType::Q5_K:
        return interleaved_matmul<GgmlType::Q5_K>(w, xq, y, r0, r1);
      case GgmlType::Q6_K:
        return interleaved_matmul<GgmlType::Q6_K>(w, xq, y, r0, r1);
      default:
        break;
    }
  }
  SS_CHECK(int8_avx2_plain_type(w.type));
  if (w.type == GgmlType::Q4_0)
    avx2_matmul<GgmlType::Q4_0>(w, xq, y, r0, r1);
  else
    avx2_matmul<GgmlType::Q8_0>(w, xq, y, r0, r1);
}

}  // namespace
}  // namespace ss
