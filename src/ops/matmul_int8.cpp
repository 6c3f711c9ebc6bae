#include "ops/matmul_int8.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <mutex>
#include <type_traits>

#include "format/ggml_types.h"
#include "ops/act_groups.h"
#include "ops/amx.h"
#include "ops/interleave.h"
#include "ops/interleave_x86.h"
#include "ops/matmul_int8_avx2.h"
#include "ops/matmul_int8_decoded.h"
#include "util/check.h"
#include "util/cpu_features.h"
#include "util/float_int.h"
#include "util/fp16.h"

#if defined(__x86_64__)
#include "ops/x86_intrinsics.h"
#endif

namespace ss {

namespace {

[[maybe_unused]] bool int8_type(GgmlType t) {
  return t == GgmlType::Q4_0 || t == GgmlType::Q8_0 || t == GgmlType::Q4_K || t == GgmlType::Q5_K ||
         t == GgmlType::Q6_K;
}

// Q4_K and Q5_K: sub-blocks of 32 with a scale and a min each (the same
// layout but for Q5_K's 32 bytes of high bits before the nibbles).
bool k45(GgmlType t) { return t == GgmlType::Q4_K || t == GgmlType::Q5_K; }

// Q6_K: weight e (0..255) of a super-block as a signed 6-bit integer: half
// e / 128, quarter (e % 128) / 32 of it; low nibble from ql (quarters 0, 2
// read bytes 0-31 of the half's 64, quarters 1, 3 bytes 32-63; 2 and 3 the
// high nibbles), two high bits from qh byte e % 32 of the half, shifted by
// 2 * quarter. Its scale is the int8 of sub-block e / 16, times d.
int q6k_value(const uint8_t* blk, int e) {
  const int h = e / 128, quarter = (e % 128) / 32, l = e % 32;
  const uint8_t lo = blk[64 * h + l + 32 * (quarter & 1)];
  const int nib = quarter < 2 ? lo & 0x0F : lo >> 4;
  const int hi = (blk[128 + 32 * h + l] >> (2 * quarter)) & 3;
  return (nib | (hi << 4)) - 32;
}

// Block b (32 weights) of a row as integers with its scale and min: weight i
// = scale * out[i] - min. Q4_0: nibble - 8, min 0; Q8_0: the int8, min 0;
// Q4_K: sub-block b % 8 of super-block b / 8, nibble 0..15, scale d * sc,
// min dmin * m; Q5_K the same with bit b % 8 of qh[i] as bit 4 (0..31).
void block_ints(GgmlType t, const uint8_t* row, int64_t b, int8_t* out, float* scale, float* min) {
  uint16_t h;
  *min = 0;
  if (t == GgmlType::Q4_0) {
    const uint8_t* blk = row + b * 18;
    std::memcpy(&h, blk, 2);
    for (int i = 0; i < 16; ++i) {
      out[i] = static_cast<int8_t>((blk[2 + i] & 0x0F) - 8);
      out[i + 16] = static_cast<int8_t>((blk[2 + i] >> 4) - 8);
    }
  } else if (t == GgmlType::Q8_0) {
    const uint8_t* blk = row + b * 34;
    std::memcpy(&h, blk, 2);
    std::memcpy(out, blk + 2, 32);
  } else {
    const bool five = t == GgmlType::Q5_K;
    const uint8_t* blk = row + (b / 8) * (five ? kQ5_KBytes : kQ4_KBytes);
    const int sub = static_cast<int>(b % 8);
    uint16_t hm;
    std::memcpy(&h, blk, 2);
    std::memcpy(&hm, blk + 2, 2);
    int sc, m;
    kquant_scale_min(blk + 4, sub, sc, m);
    const uint8_t* qs = blk + (five ? 48 : 16) + 32 * (sub / 2);
    for (int i = 0; i < 32; ++i) {
      const int top = five ? ((blk[16 + i] >> sub) & 1) << 4 : 0;
      out[i] = static_cast<int8_t>((sub & 1 ? qs[i] >> 4 : qs[i] & 0x0F) | top);
    }
    *scale = fp16_to_fp32(h) * static_cast<float>(sc);
    *min = fp16_to_fp32(hm) * static_cast<float>(m);
    return;
  }
  *scale = fp16_to_fp32(h);
}

// Block b of the row against block b of activation row t, the integer dot
// exact: d_w * d_x * dot; for Q4_K/Q5_K d_x * (scale * dot - min * sum of
// the activation block); for Q6_K d * d_x * (sc0 * dot0 + sc1 * dot1) over its
// two sub-blocks of 16. The unit the scalar twin and the SIMD tails add up.
float scaled_block_dot(GgmlType t, const uint8_t* row, int64_t b, const QuantizedActs& xq, int64_t act_row) {
  const int8_t* xb = xq.q.data() + act_row * xq.cols + b * kActBlock;
  const size_t i = static_cast<size_t>(act_row * xq.blocks() + b);
  if (t == GgmlType::Q6_K) {  // two sub-blocks of 16, each with its own scale
    const uint8_t* blk = row + (b / 8) * kQ6_KBytes;
    const int e0 = static_cast<int>(b % 8) * kActBlock;
    int32_t dot[2] = {0, 0};
    for (int j = 0; j < kActBlock; ++j) dot[j / 16] += q6k_value(blk, e0 + j) * xb[j];
    const auto* sc = reinterpret_cast<const int8_t*>(blk + 192);
    uint16_t h;
    std::memcpy(&h, blk + 208, 2);
    const float d = fp16_to_fp32(h);
    return xq.d[i] * d *
           (static_cast<float>(sc[e0 / 16]) * static_cast<float>(dot[0]) +
            static_cast<float>(sc[e0 / 16 + 1]) * static_cast<float>(dot[1]));
  }
  int8_t wi[kActBlock];
  float dw, mn;
  block_ints(t, row, b, wi, &dw, &mn);
  int32_t dot = 0;
  for (int j = 0; j < kActBlock; ++j) dot += wi[j] * xb[j];
  if (k45(t)) return xq.d[i] * (dw * static_cast<float>(dot) - mn * static_cast<float>(xq.sum[i]));
  return dw * xq.d[i] * static_cast<float>(dot);
}

}  // namespace

namespace {
// One block of 32: d = max|x| / 127, q = x / d rounded to nearest (ties to
// even, as the SIMD conversion rounds); half_sums: the sums of q[0, 16) and
// q[16, 32) (Q6_K's sub-blocks; their total is the block's).
void quantize_block_scalar(const float* x, int8_t* q, float* d_out, int32_t* half_sums) {
  float amax = 0;
  for (int i = 0; i < kActBlock; ++i) amax = std::max(amax, std::fabs(x[i]));
  const float d = amax / 127.0f;
  const float id = d > 0 ? 1.0f / d : 0.0f;
  half_sums[0] = half_sums[1] = 0;
  for (int i = 0; i < kActBlock; ++i) {
    q[i] = static_cast<int8_t>(std::clamp(round_to_int(x[i] * id), -127, 127));
    half_sums[i / 16] += q[i];
  }
  *d_out = d;
}

void quantize_block(const float* x, int8_t* q, float* d_out, int32_t* half_sums);
// AMX tiles are present, permitted and within the CPU cap.
bool amx_for_batches();
}  // namespace

void quantize_acts(const float* x, int n, int64_t cols, QuantizedActs& out, ThreadPool* pool) {
  SS_CHECK(cols % kActBlock == 0);
  const int64_t nb = cols / kActBlock;
  out.n = n;
  out.cols = cols;
  out.q.resize(static_cast<size_t>(n * cols));
  out.d.resize(static_cast<size_t>(n * nb));
  out.sum.resize(static_cast<size_t>(n * nb));
  out.sum16.resize(static_cast<size_t>(2 * n * nb));
  out.dsum.resize(static_cast<size_t>(n * nb));
  out.amx = n >= kAmxMinRows && amx_for_batches();
  // AMX operand: per 16 rows and block, [k/4][row][4] bytes (rows past n: 0).
  const int groups = out.amx ? (n + 15) / 16 : 0;
  out.q_halves.resize(out.amx ? 0 : static_cast<size_t>(n * cols));
  out.packed.resize(static_cast<size_t>(groups) * nb * 512);
  out.packed_d.resize(static_cast<size_t>(groups) * nb * 16);
  out.packed_dsum.resize(static_cast<size_t>(groups) * nb * 16);
  auto rows = [&](size_t t0, size_t t1) {
    for (int64_t t = static_cast<int64_t>(t0); t < static_cast<int64_t>(t1); ++t) {
      const bool real = t < n;  // rows n.. up to the group's end are padding
      const int8_t* src = real ? out.q.data() + t * cols : nullptr;
      for (int64_t b = 0; real && b < nb; ++b) {
        const size_t i = static_cast<size_t>(t * nb + b);
        int32_t* halves = out.sum16.data() + 2 * i;
        quantize_block(x + t * cols + b * kActBlock, out.q.data() + t * cols + b * kActBlock, &out.d[i], halves);
        out.sum[i] = halves[0] + halves[1];
        out.dsum[i] = out.d[i] * static_cast<float>(out.sum[i]);
      }
      if (!out.amx) {  // every row is real here: only AMX groups have padding
        int8_t* h = out.q_halves.data() + t * cols;
        int64_t b = 0;
        for (; b + 2 <= nb; b += 2)
          for (int part = 0; part < 4; ++part)  // b lo, b+1 lo, b hi, b+1 hi
            std::memcpy(h + b * kActBlock + part * 16, src + (b + (part & 1)) * kActBlock + (part >> 1) * 16, 16);
        if (b < nb) std::memcpy(h + b * kActBlock, src + b * kActBlock, kActBlock);
        continue;
      }
      const int64_t g = t / 16, row = t % 16;
      int8_t* dst = out.packed.data() + g * nb * 512 + row * 4;
      for (int64_t k4 = 0; k4 < nb * 8; ++k4) {
        if (real)
          std::memcpy(dst + k4 * 64, src + k4 * 4, 4);
        else
          std::memset(dst + k4 * 64, 0, 4);
      }
      for (int64_t b = 0; b < nb; ++b) {
        const size_t i = static_cast<size_t>(t * nb + b), o = static_cast<size_t>((g * nb + b) * 16 + row);
        out.packed_d[o] = real ? out.d[i] : 0.0f;
        out.packed_dsum[o] = real ? out.dsum[i] : 0.0f;
      }
    }
  };
  const size_t total = out.amx ? static_cast<size_t>(groups) * 16 : static_cast<size_t>(n);
  const int parts = pool ? static_cast<int>(std::min<int64_t>(pool->size(), n / 8)) : 1;
  if (parts > 1)
    pool->parallel_for(total, rows, parts);
  else
    rows(0, total);
}

void matmul_int8_reference(const TensorView& w, const QuantizedActs& xq, float* y) {
  const int64_t nb = xq.blocks(), rows = w.ne1;
  for (int64_t r = 0; r < rows; ++r)
    for (int t = 0; t < xq.n; ++t) {
      float s = 0;
      for (int64_t b = 0; b < nb; ++b) s += scaled_block_dot(w.type, w.row(r), b, xq, t);
      y[t * rows + r] = s;
    }
}

#if defined(__x86_64__) && defined(__GNUC__)

namespace {

#define SS_VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,f16c")))
#define SS_AMX __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,f16c,amx-tile,amx-int8")))

// Asked at every call, so a changed cap (util/cpu_features.h) takes effect.
bool cpu_has_vnni() { return cpu_usable(kCpuAvx512Vnni); }
bool amx_enabled() { return cpu_usable(kCpuAmxInt8) && cpu_has_vnni(); }

// The 64 weights of blocks b, b+1 of a row as bytes, made unsigned for
// vpdpbusd: Q4_0 nibbles (value + 8) in q_halves order, Q8_0 int8 ^ 0x80
// (value + 128) in natural order. The offset comes back out through the
// activation sums.
template <GgmlType T>
SS_VNNI inline __m512i load_pair(const uint8_t* p0, const uint8_t* p1) {
  if constexpr (T == GgmlType::Q4_0) {
    const __m256i y =
        _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p0 + 2))),
                                _mm_loadu_si128(reinterpret_cast<const __m128i*>(p1 + 2)), 1);
    __m512i z = _mm512_inserti64x4(_mm512_castsi256_si512(y), _mm256_srli_epi16(y, 4), 1);
    return _mm512_and_si512(z, _mm512_set1_epi8(0x0F));  // [lo0, lo1, hi0, hi1]: matches q_halves
  } else {
    const __m512i z =
        _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p0 + 2))),
                           _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p1 + 2)), 1);
    return _mm512_xor_si512(z, _mm512_set1_epi8(static_cast<char>(0x80)));
  }
}

template <GgmlType T>
constexpr int64_t kBlockBytes = T == GgmlType::Q4_0 ? 18 : 34;
template <GgmlType T>
constexpr int32_t kOffset = T == GgmlType::Q4_0 ? 8 : 128;

SS_VNNI inline __m128 pair_scales(const uint8_t* p0, const uint8_t* p1) {
  uint16_t h0, h1;
  std::memcpy(&h0, p0, 2);
  std::memcpy(&h1, p1, 2);
  return _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(h0 | (static_cast<uint32_t>(h1) << 16))));
}

// R weight rows (decoded once per block pair) against NT activation rows
// starting at t0: y[k * y_stride + q].
template <GgmlType T, int R, int NT>
SS_VNNI void vnni_tile(const uint8_t* const* rows, const QuantizedActs& xq, int t0, float* y, int64_t y_stride,
                       int64_t prefetch_ahead) {
  constexpr int64_t BB = kBlockBytes<T>;
  const int64_t nb = xq.blocks(), cols = xq.cols;
  // Which block of the pair each 32-bit lane of a product belongs to.
  constexpr bool halves = T == GgmlType::Q4_0;
  const __m512i lane_block = halves ? _mm512_set_epi32(1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0)
                                    : _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
  const int8_t* acts = halves ? xq.q_halves.data() : xq.q.data();
  __m512 acc[R][NT];
  for (int q = 0; q < R; ++q)
    for (int k = 0; k < NT; ++k) acc[q][k] = _mm512_setzero_ps();
  int64_t b = 0;
  for (; b + 2 <= nb; b += 2) {
    __m512i xv[NT], bias[NT];
    __m128 dx[NT];
    for (int k = 0; k < NT; ++k) {
      const int t = t0 + k;
      xv[k] = _mm512_loadu_si512(acts + t * cols + b * kActBlock);
      const int32_t* s = xq.sum.data() + t * nb + b;
      bias[k] = _mm512_mask_set1_epi32(_mm512_maskz_set1_epi32(0x0001, -kOffset<T> * s[0]), halves ? 0x0010 : 0x0100,
                                       -kOffset<T> * s[1]);
      int64_t pair;  // d of blocks b, b+1 (floats: only 4-byte aligned)
      std::memcpy(&pair, xq.d.data() + t * nb + b, sizeof pair);
      dx[k] = _mm_castsi128_ps(_mm_cvtsi64_si128(pair));
    }
    for (int q = 0; q < R; ++q) {
      const uint8_t* p0 = rows[q] + b * BB;
      _mm_prefetch(reinterpret_cast<const char*>(p0 + prefetch_ahead), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(p0 + prefetch_ahead + 64), _MM_HINT_T0);
      const __m512i w = load_pair<T>(p0, p0 + BB);
      const __m128 dw = pair_scales(p0, p0 + BB);
      for (int k = 0; k < NT; ++k) {
        const __m512i dp = _mm512_dpbusd_epi32(bias[k], w, xv[k]);
        const __m512 sc = _mm512_permutexvar_ps(lane_block, _mm512_castps128_ps512(_mm_mul_ps(dw, dx[k])));
        acc[q][k] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dp), sc, acc[q][k]);
      }
    }
  }
  for (int q = 0; q < R; ++q)
    for (int k = 0; k < NT; ++k) {
      float s = _mm512_reduce_add_ps(acc[q][k]);
      for (int64_t bl = b; bl < nb; ++bl) s += scaled_block_dot(T, rows[q], bl, xq, t0 + k);  // an odd last block
      y[k * y_stride + q] = s;
    }
}

// Q4_K: super-blocks of 256 weights, eight sub-blocks of 32 (one activation
// block each) with their own scale and min, weight = d*sc*q - dmin*m with q
// in 0..15. The 32 nibble bytes of group g hold sub-block 2g in their low
// and 2g+1 in their high nibbles, each in natural order, so one register of
// 64 unsigned weights meets 64 consecutive activations with one vpdpbusd
// (lanes 0-7: sub-block 2g, 8-15: 2g+1). The min part is, per super-block,
// the mins times the activation blocks' d * sum: eight lanes at once.
// Q5_K (kFive) adds bit 2g (low lanes) or 2g+1 (high) of its 32 qh bytes as
// bit 4 of each weight.
template <bool kFive, int R, int NT>
SS_VNNI void vnni_tile_q4k(const uint8_t* const* rows, const QuantizedActs& xq, int t0, float* y, int64_t y_stride,
                           int64_t prefetch_ahead) {
  const int64_t nb = xq.blocks(), cols = xq.cols;
  __m512i pick[4];  // lanes 0-7 take scale 2g, 8-15 scale 2g+1
  for (int g = 0; g < 4; ++g)
    pick[g] = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi32(2 * g)), _mm256_set1_epi32(2 * g + 1), 1);
  __m512 acc[R][NT];
  __m256 mins[R][NT];
  for (int q = 0; q < R; ++q)
    for (int k = 0; k < NT; ++k) {
      acc[q][k] = _mm512_setzero_ps();
      mins[q][k] = _mm256_setzero_ps();
    }
  for (int64_t sb = 0; sb * 8 < nb; ++sb) {
    __m256 dx[NT], dsum[NT];  // per activation block of this super-block: d and d * sum
    for (int k = 0; k < NT; ++k) {
      const int64_t at = (t0 + k) * nb + sb * 8;
      dx[k] = _mm256_loadu_ps(xq.d.data() + at);
      dsum[k] = _mm256_mul_ps(
          dx[k], _mm256_cvtepi32_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq.sum.data() + at))));
    }
    for (int q = 0; q < R; ++q) {
      constexpr int kBytes = kFive ? kQ5_KBytes : kQ4_KBytes;
      const uint8_t* blk = rows[q] + sb * kBytes;
      prefetch_lines<kBytes>(blk + prefetch_ahead);
      uint16_t hd[2];
      std::memcpy(hd, blk, 4);
      alignas(16) uint8_t scm[16];
      kquant_scales_mins(blk + 4, scm, scm + 8);
      const __m128i bytes = _mm_load_si128(reinterpret_cast<const __m128i*>(scm));
      const __m256 sc =
          _mm256_mul_ps(_mm256_set1_ps(fp16_to_fp32(hd[0])), _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(bytes)));
      const __m256 mn = _mm256_mul_ps(_mm256_set1_ps(fp16_to_fp32(hd[1])),
                                      _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(bytes, 8))));
      __m512 scale[NT];
      for (int k = 0; k < NT; ++k) {
        mins[q][k] = _mm256_add_ps(_mm256_mul_ps(mn, dsum[k]), mins[q][k]);
        scale[k] = _mm512_castps256_ps512(_mm256_mul_ps(sc, dx[k]));
      }
      __m512i qh2 = _mm512_setzero_si512();
      if constexpr (kFive) {
        const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 16));
        qh2 = _mm512_inserti64x4(_mm512_castsi256_si512(qh), qh, 1);
      }
      for (int g = 0; g < 4; ++g) {
        const __m256i nib = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + (kFive ? 48 : 16) + 32 * g));
        __m512i w = _mm512_and_si512(_mm512_inserti64x4(_mm512_castsi256_si512(nib), _mm256_srli_epi16(nib, 4), 1),
                                     _mm512_set1_epi8(0x0F));
        if constexpr (kFive) {  // 16-bit lanes 0-15 shift by 2g, 16-31 by 2g+1
          const __m512i shift = _mm512_inserti64x4(_mm512_set1_epi16(static_cast<int16_t>(2 * g)),
                                                   _mm256_set1_epi16(static_cast<int16_t>(2 * g + 1)), 1);
          const __m512i top = _mm512_and_si512(_mm512_srlv_epi16(qh2, shift), _mm512_set1_epi8(1));
          w = _mm512_or_si512(w, _mm512_slli_epi16(top, 4));
        }
        for (int k = 0; k < NT; ++k) {
          const __m512i xv = _mm512_loadu_si512(xq.q.data() + (t0 + k) * cols + sb * 256 + 64 * g);
          const __m512i dp = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w, xv);
          acc[q][k] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dp), _mm512_permutexvar_ps(pick[g], scale[k]), acc[q][k]);
        }
      }
    }
  }
  for (int q = 0; q < R; ++q)
    for (int k = 0; k < NT; ++k) {
      const __m128 m4 = _mm_add_ps(_mm256_castps256_ps128(mins[q][k]), _mm256_extractf128_ps(mins[q][k], 1));
      const __m128 m2 = _mm_add_ps(m4, _mm_movehl_ps(m4, m4));
      y[k * y_stride + q] = _mm512_reduce_add_ps(acc[q][k]) - _mm_cvtss_f32(_mm_add_ss(m2, _mm_movehdup_ps(m2)));
    }
}

// Q6_K: super-blocks of 256 weights (210 bytes), sixteen sub-blocks of 16
// with int8 scales, weights 0..63 - 32. Chunk c (64 weights) of a
// super-block comes out of one register: the 64 ql bytes of half c / 2 (low
// nibbles for even c, high for odd) and the half's 32 qh bytes twice, the
// lower copy shifted by 4 * (c % 2), the upper by 2 more. Lane l of the
// vpdpbusd product covers weights 4l..4l+3 of the chunk: sub-block 4c + l / 4
// (its scale) and activation block 2c + l / 8 (its d). The -32 comes back
// out as 32 times the activations' sum per lane, computed once per
// activation row and super-block for all weight rows.
template <int R, int NT>
SS_VNNI void vnni_tile_q6k(const uint8_t* const* rows, const QuantizedActs& xq, int t0, float* y, int64_t y_stride,
                           int64_t prefetch_ahead) {
  const int64_t nb = xq.blocks(), cols = xq.cols;
  __m512i sub_of_lane[4], block_of_lane[4], qh_shift[2];
  for (int c = 0; c < 4; ++c) {
    alignas(64) int32_t s[16], b[16];
    for (int l = 0; l < 16; ++l) {
      s[l] = 4 * c + l / 4;
      b[l] = 2 * c + l / 8;
    }
    sub_of_lane[c] = _mm512_load_si512(s);
    block_of_lane[c] = _mm512_load_si512(b);
  }
  for (int odd = 0; odd < 2; ++odd)  // 16-bit lanes: 0-15 the lower copy, 16-31 the upper
    qh_shift[odd] = _mm512_inserti64x4(_mm512_set1_epi16(static_cast<int16_t>(4 * odd)),
                                       _mm256_set1_epi16(static_cast<int16_t>(4 * odd + 2)), 1);
  const __m512i low4 = _mm512_set1_epi8(0x0F), low2 = _mm512_set1_epi8(3), k32 = _mm512_set1_epi8(32);
  __m512 acc[R][NT];
  for (int q = 0; q < R; ++q)
    for (int k = 0; k < NT; ++k) acc[q][k] = _mm512_setzero_ps();
  for (int64_t sb = 0; sb * 8 < nb; ++sb) {
    alignas(64) int32_t neg_offset[NT][4][16];  // -32 * sum of the lane's four activations
    alignas(64) float dx[NT][4][16];            // the lane's activation block d
    for (int k = 0; k < NT; ++k) {
      const int8_t* x = xq.q.data() + (t0 + k) * cols + sb * 256;
      const __m512 d8 = _mm512_castps256_ps512(_mm256_loadu_ps(xq.d.data() + (t0 + k) * nb + sb * 8));
      for (int c = 0; c < 4; ++c) {
        const __m512i s = _mm512_dpbusd_epi32(_mm512_setzero_si512(), k32, _mm512_loadu_si512(x + 64 * c));
        _mm512_store_si512(neg_offset[k][c], _mm512_sub_epi32(_mm512_setzero_si512(), s));
        _mm512_store_ps(dx[k][c], _mm512_permutexvar_ps(block_of_lane[c], d8));
      }
    }
    for (int q = 0; q < R; ++q) {
      const uint8_t* blk = rows[q] + sb * kQ6_KBytes;
      prefetch_lines<kQ6_KBytes>(blk + prefetch_ahead);
      uint16_t hd;
      std::memcpy(&hd, blk + 208, 2);
      const __m512 sc = _mm512_mul_ps(
          _mm512_set1_ps(_cvtsh_ss(hd)),
          _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 192)))));
      for (int half = 0; half < 2; ++half) {
        const __m512i ql = _mm512_loadu_si512(blk + 64 * half);
        const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 128 + 32 * half));
        const __m512i qh2 = _mm512_inserti64x4(_mm512_castsi256_si512(qh), qh, 1);
        for (int odd = 0; odd < 2; ++odd) {
          const int c = 2 * half + odd;
          const __m512i nib = _mm512_and_si512(odd ? _mm512_srli_epi16(ql, 4) : ql, low4);
          const __m512i top = _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi16(qh2, qh_shift[odd]), low2), 4);
          const __m512i w = _mm512_or_si512(nib, top);
          const __m512 wsc = _mm512_permutexvar_ps(sub_of_lane[c], sc);
          for (int k = 0; k < NT; ++k) {
            const __m512i xv = _mm512_loadu_si512(xq.q.data() + (t0 + k) * cols + sb * 256 + 64 * c);
            const __m512i dp = _mm512_dpbusd_epi32(_mm512_load_si512(neg_offset[k][c]), w, xv);
            acc[q][k] =
                _mm512_fmadd_ps(_mm512_cvtepi32_ps(dp), _mm512_mul_ps(wsc, _mm512_load_ps(dx[k][c])), acc[q][k]);
          }
        }
      }
    }
  }
  for (int q = 0; q < R; ++q)
    for (int k = 0; k < NT; ++k) y[k * y_stride + q] = _mm512_reduce_add_ps(acc[q][k]);
}

template <GgmlType T, int R, int NT>
SS_VNNI void any_tile(const uint8_t* const* rows, const QuantizedActs& xq, int t0, float* y, int64_t y_stride,
                      int64_t prefetch_ahead) {
  if constexpr (T == GgmlType::Q4_K || T == GgmlType::Q5_K)
    vnni_tile_q4k<T == GgmlType::Q5_K, R, NT>(rows, xq, t0, y, y_stride, prefetch_ahead);
  else if constexpr (T == GgmlType::Q6_K)
    vnni_tile_q6k<R, NT>(rows, xq, t0, y, y_stride, prefetch_ahead);
  else
    vnni_tile<T, R, NT>(rows, xq, t0, y, y_stride, prefetch_ahead);
}

template <GgmlType T, int NT>
SS_VNNI void vnni_rows(const TensorView& w, const QuantizedActs& xq, int t0, float* y, int64_t r0, int64_t r1) {
  const int64_t rows = w.ne1, rb = static_cast<int64_t>(row_bytes(w.type, w.ne0));
  int64_t r = r0;
  for (; r + 4 <= r1; r += 4) {
    const uint8_t* rs[4] = {w.row(r), w.row(r + 1), w.row(r + 2), w.row(r + 3)};
    any_tile<T, 4, NT>(rs, xq, t0, y + t0 * rows + r, rows, 4 * rb);
  }
  for (; r < r1; ++r) {
    const uint8_t* rs[1] = {w.row(r)};
    any_tile<T, 1, NT>(rs, xq, t0, y + t0 * rows + r, rows, rb);
  }
}

// Rows in strips of 16, each met by every group of activation rows while
// its weights are still in L1/L2 (a batch reads the matrix once, not once per
// group of four activation rows).
template <GgmlType T>
SS_VNNI void vnni_matmul(const TensorView& w, const QuantizedActs& xq, float* y, int64_t r0, int64_t r1) {
  // Plain Q4_0 reads q_halves, which activations packed for AMX lack.
  if constexpr (T == GgmlType::Q4_0) SS_CHECK(!xq.q_halves.empty());
  for (int64_t s0 = r0; s0 < r1; s0 += 16) {
    const int64_t s1 = std::min(r1, s0 + 16);
    for_act_groups(xq.n, [&](int t, auto nt) { vnni_rows<T, decltype(nt)::value>(w, xq, t, y, s0, s1); });
  }
}

// Q4_0 interleaved 16 rows at a time (ops/interleave.h) against NT
// activation rows from t0: y[k * y_stride + m] for the group's row m. Per
// block, each 64-byte chunk j gives four weights of every row in its low
// nibbles (against activations 4j..4j+3, one broadcast) and four in its
// high ones (16+4j..); lanes are rows, so the block's 16 dots come out
// together and take their scales d_w (one vcvtph2ps) * d_x in one multiply.
// The nibbles' +8 comes back out through -8 * the activation block's sum.
template <int NT>
SS_VNNI void interleaved_tile(const uint8_t* group, const QuantizedActs& xq, int t0, float* y, int64_t y_stride,
                              bool prefetch = true) {
  const int64_t nb = xq.blocks(), cols = xq.cols;
  const __m512i low = _mm512_set1_epi8(0x0F);
  __m512 acc[NT];
  for (int k = 0; k < NT; ++k) acc[k] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* p = group + b * kInterleavedBlockBytes;
    // Eight blocks (2304 bytes) ahead into L1: TinyLlama Q4_0 decode, 2
    // threads, six interleaved rounds: 35.9-37.8 -> 39.6-41.4 tok/s; 1152
    // bytes about the same, 4608 and 9216 slower (33-34). Decode's leftover
    // groups follow decode_prefetch() (off on Zen 4).
    if (prefetch) prefetch_lines<kInterleavedBlockBytes>(p + 8 * kInterleavedBlockBytes);
    const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    __m512i dlo[NT], dhi[NT];  // two chains per block: half the dependent vpdpbusd latency
    for (int k = 0; k < NT; ++k) {
      dlo[k] = _mm512_set1_epi32(-8 * xq.sum[static_cast<size_t>((t0 + k) * nb + b)]);
      dhi[k] = _mm512_setzero_si512();
    }
    for (int j = 0; j < 4; ++j) {
      const __m512i v = _mm512_loadu_si512(p + 32 + 64 * j);
      const __m512i lo = _mm512_and_si512(v, low), hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), low);
      for (int k = 0; k < NT; ++k) {
        const int8_t* x = xq.q.data() + (t0 + k) * cols + b * kActBlock + 4 * j;
        int32_t xl, xh;
        std::memcpy(&xl, x, 4);
        std::memcpy(&xh, x + 16, 4);
        dlo[k] = _mm512_dpbusd_epi32(dlo[k], lo, _mm512_set1_epi32(xl));
        dhi[k] = _mm512_dpbusd_epi32(dhi[k], hi, _mm512_set1_epi32(xh));
      }
    }
    for (int k = 0; k < NT; ++k) {
      const __m512 s = _mm512_mul_ps(dw, _mm512_set1_ps(xq.d[static_cast<size_t>((t0 + k) * nb + b)]));
      acc[k] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(dlo[k], dhi[k])), s, acc[k]);
    }
  }
  for (int k = 0; k < NT; ++k) _mm512_storeu_ps(y + k * y_stride, acc[k]);
}

// G Q4_0 or Q8_0 groups (16G weight rows: group u at group + u *
// step.bytes) against NT activation rows from t0: each activation broadcast
// feeds every group's vpdpbusd, cutting the broadcasts per product of
// interleaved_tile / interleaved_q8_tile by G; one chain per (group, row)
// (batches have enough of them to hide the latency; the integer sums, and so
// the results, are those kernels' bit for bit). Per block, four steps of two
// weight vectors per group: Q4_0 chunk s's low and high nibbles (activations
// 4s.. and 16 + 4s..), Q8_0 chunks 2s and 2s + 1 (8s.. and 8s + 4..). y as
// there, group u's 16 rows at y + u * step.rows.
template <GgmlType T, int NT, int G>
SS_VNNI void interleaved_tile_groups(const uint8_t* group, const QuantizedActs& xq, int t0, float* y, int64_t y_stride,
                                     GroupStep step, bool prefetch = true) {
  constexpr bool kQ4 = T == GgmlType::Q4_0;
  constexpr int64_t kBytes = kQ4 ? kInterleavedBlockBytes : kQ8InterleavedBlockBytes;
  const int64_t nb = xq.blocks(), cols = xq.cols;
  const __m512i low = _mm512_set1_epi8(0x0F);
  __m512 acc[G][NT];
  for (int u = 0; u < G; ++u)
    for (int k = 0; k < NT; ++k) acc[u][k] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* p[G];
    for (int u = 0; u < G; ++u) p[u] = group + u * step.bytes + b * kBytes;
    // Decode (NT < 4), Q4_0: every stream into L1 32 / G blocks ahead (9216
    // bytes ahead over all streams, as the K-quants). Two streams 16 blocks
    // ahead: TinyLlama Q4_0 decode on the Zen 5 VM, one thread, four
    // alternating runs, 47.8 -> 49.5 tok/s (higher in each). Four streams:
    // kernels_bench DecodeSweep, share of the read probe, one thread, three
    // alternating rounds: 8 ahead 0.80-0.89, 4 0.76-0.80, 6 0.78-0.85, 12
    // 0.76-0.78, 16 0.76-0.79, none 0.72-0.74. Q8_0 was slower with it (two
    // streams, 8 blocks ahead: 27.6 -> 25.8 tok/s). Not on Zen 4, where it
    // slows the sweep (decode_prefetch(), util/cpu_features.h).
    if constexpr (kQ4 && NT < 4)
      if (prefetch)
        for (int u = 0; u < G; ++u) prefetch_lines<kBytes>(p[u] + 32 / G * kBytes);
    __m512i dot[G][NT];
    for (int k = 0; k < NT; ++k) {
      const __m512i offset = _mm512_set1_epi32((kQ4 ? -8 : -128) * xq.sum[static_cast<size_t>((t0 + k) * nb + b)]);
      for (int u = 0; u < G; ++u) dot[u][k] = offset;
    }
    for (int st = 0; st < 4; ++st) {
      __m512i w0[G], w1[G];
      for (int u = 0; u < G; ++u) {
        if constexpr (kQ4) {
          const __m512i v = _mm512_loadu_si512(p[u] + 32 + 64 * st);
          w0[u] = _mm512_and_si512(v, low);
          w1[u] = _mm512_and_si512(_mm512_srli_epi16(v, 4), low);
        } else {
          w0[u] = _mm512_loadu_si512(p[u] + 32 + 128 * st);
          w1[u] = _mm512_loadu_si512(p[u] + 96 + 128 * st);
        }
      }
      for (int k = 0; k < NT; ++k) {
        const int8_t* x = xq.q.data() + (t0 + k) * cols + b * kActBlock + (kQ4 ? 4 : 8) * st;
        int32_t x0, x1;
        std::memcpy(&x0, x, 4);
        std::memcpy(&x1, x + (kQ4 ? 16 : 4), 4);
        const __m512i b0 = _mm512_set1_epi32(x0), b1 = _mm512_set1_epi32(x1);
        for (int u = 0; u < G; ++u) {
          dot[u][k] = _mm512_dpbusd_epi32(dot[u][k], w0[u], b0);
          dot[u][k] = _mm512_dpbusd_epi32(dot[u][k], w1[u], b1);
        }
      }
    }
    for (int u = 0; u < G; ++u) {
      const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p[u])));
      for (int k = 0; k < NT; ++k) {
        const __m512 s = _mm512_mul_ps(dw, _mm512_set1_ps(xq.d[static_cast<size_t>((t0 + k) * nb + b)]));
        acc[u][k] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot[u][k]), s, acc[u][k]);
      }
    }
  }
  for (int u = 0; u < G; ++u)
    for (int k = 0; k < NT; ++k) _mm512_storeu_ps(y + k * y_stride + u * step.rows, acc[u][k]);
}

// The K-quant tiles' two integer sums per activation row and group:
// dlo[u][k] += w_lo[u] times the four activation bytes at `at` of row t0 + k,
// dhi[u][k] += w_hi[u] times those 32 further on (`at` counted within the
// row); each broadcast feeds all G groups.
template <int G, int NT>
SS_VNNI __attribute__((always_inline)) inline void dot_pair(__m512i (&dlo)[G][NT], __m512i (&dhi)[G][NT],
                                                            const __m512i (&w_lo)[G], const __m512i (&w_hi)[G],
                                                            const QuantizedActs& xq, int t0, int64_t at) {
  for (int k = 0; k < NT; ++k) {
    const int8_t* x = xq.q.data() + (t0 + k) * xq.cols + at;
    int32_t xl, xh;
    std::memcpy(&xl, x, 4);
    std::memcpy(&xh, x + 32, 4);
    const __m512i bl = _mm512_set1_epi32(xl), bh = _mm512_set1_epi32(xh);
    for (int u = 0; u < G; ++u) {
      dlo[u][k] = _mm512_dpbusd_epi32(dlo[u][k], w_lo[u], bl);
      dhi[u][k] = _mm512_dpbusd_epi32(dhi[u][k], w_hi[u], bh);
    }
  }
}

// Their scaling step, straight into the rows' float sums: acc[k] += dlo[k]
// * sc_lo * the d of activation block a0 + dhi[k] * sc_hi * the d of a0 + 1
// (a0 counted within a row; sc_lo, sc_hi per weight row, the super-block's
// d included).
template <int NT>
SS_VNNI __attribute__((always_inline)) inline void add_scaled_pair(__m512 (&acc)[NT], const __m512i (&dlo)[NT],
                                                                   const __m512i (&dhi)[NT], __m512 sc_lo, __m512 sc_hi,
                                                                   const QuantizedActs& xq, int t0, int64_t a0) {
  for (int k = 0; k < NT; ++k) {
    const size_t a = static_cast<size_t>((t0 + k) * xq.blocks() + a0);
    acc[k] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dlo[k]), _mm512_mul_ps(sc_lo, _mm512_set1_ps(xq.d[a])), acc[k]);
    acc[k] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dhi[k]), _mm512_mul_ps(sc_hi, _mm512_set1_ps(xq.d[a + 1])), acc[k]);
  }
}

// Q4_K (Q5_K: kFive) interleaved 16 rows at a time (ops/interleave.h)
// against NT activation rows from t0, lanes = rows as for Q4_0. Per
// super-block, pair p of sub-blocks comes from eight 64-byte chunks: low
// nibbles (sub-block 2p) against activations 64p + 4c.., high nibbles (2p +
// 1) against 64p + 32 + 4c.. (Q5_K: each with its fifth bit from the pair's
// top-bit chunk c / 4, bits 2(c % 4) and 2(c % 4) + 1); each sub-block's 16
// integer dots take d * their scales (16 bytes, one widening) times the
// activation block's d; the mins, dmin * 16 bytes per sub-block times the
// activation block's d * sum, come off first. Both go straight into the
// row's float sum, leaving two integer sums per row as the only other live
// registers (separate sums and mins per row spilled them at NT = 8). G
// groups (group u at group + u * step.bytes, its results at y + u *
// step.rows) share each activation broadcast, as in interleaved_tile_groups.
template <bool kFive, int NT, int G = 1>
SS_VNNI void interleaved_k45_tile(const uint8_t* group, const QuantizedActs& xq, int t0, float* y, int64_t y_stride,
                                  GroupStep step = {}) {
  constexpr int64_t kSuperBytes = kFive ? kQ5KInterleavedBytes : kQ4KInterleavedBytes;
  constexpr int kPairBytes = kFive ? kQ5KIlPairBytes : kQ4KIlPairBytes;
  const int64_t nb = xq.blocks(), cols = xq.cols, ns = cols / kQkK;
  const __m512i low = _mm512_set1_epi8(0x0F);
  const bool to_l2 = (kFive ? q5k_prefetch_target() : q4k_prefetch_target()) == PrefetchTarget::L2;
  __m512 acc[G][NT];
  for (int u = 0; u < G; ++u)
    for (int k = 0; k < NT; ++k) acc[u][k] = _mm512_setzero_ps();
  for (int64_t sb = 0; sb < ns; ++sb) {
    const uint8_t* p[G];
    for (int u = 0; u < G; ++u) p[u] = group + u * step.bytes + sb * kSuperBytes;
    for (int u = 0; u < G; ++u) {
      const __m512 dmin = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p[u] + kQ4KIlDmin)));
      for (int j = 0; j < 8; ++j) {
        const __m512 mn = _mm512_mul_ps(dmin, _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128(
                                                  reinterpret_cast<const __m128i*>(p[u] + kQ4KIlMins + 16 * j)))));
        for (int k = 0; k < NT; ++k) {
          const size_t a = static_cast<size_t>((t0 + k) * nb + sb * 8 + j);
          acc[u][k] = _mm512_fnmadd_ps(mn, _mm512_set1_ps(xq.dsum[a]), acc[u][k]);
        }
      }
    }
    for (int pair = 0; pair < 4; ++pair) {
      __m512i dlo[G][NT], dhi[G][NT];
      for (int u = 0; u < G; ++u)
        for (int k = 0; k < NT; ++k) dlo[u][k] = dhi[u][k] = _mm512_setzero_si512();
#pragma GCC unroll 8
      for (int c = 0; c < 8; ++c) {
        __m512i lo[G], hi[G];
        for (int u = 0; u < G; ++u) {
          const uint8_t* pp = p[u] + kQ4KIlNibbles + kPairBytes * pair;
          // A group's super-blocks are contiguous, and the next group follows.
          // Only the first activation rows' pass brings them in (a batch's
          // later passes meet the group in cache). Which cache:
          // q4k_prefetch_target(), q5k_prefetch_target().
          if (c % 4 == 0 && t0 == 0)
            prefetch_share_into<kSuperBytes, 8>(to_l2, p[u] + kSuperBlocksAhead<kSuperBytes> * kSuperBytes,
                                                2 * pair + c / 4);
          const __m512i v = _mm512_loadu_si512(pp + 64 * c);
          lo[u] = _mm512_and_si512(v, low);
          hi[u] = _mm512_and_si512(_mm512_srli_epi16(v, 4), low);
          if constexpr (kFive) {
            add_q5k_fifth_bits(_mm512_loadu_si512(pp + 512 + 64 * (c / 4)), c, lo[u], hi[u]);
          }
        }
        dot_pair(dlo, dhi, lo, hi, xq, t0, sb * kQkK + 64 * pair + 4 * c);
      }
      for (int u = 0; u < G; ++u) {
        const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p[u])));
        const __m512 sc_lo = _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128(
                                                  reinterpret_cast<const __m128i*>(p[u] + kQ4KIlScales + 32 * pair)))));
        const __m512 sc_hi = _mm512_mul_ps(
            d, _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(
                   _mm_loadu_si128(reinterpret_cast<const __m128i*>(p[u] + kQ4KIlScales + 32 * pair + 16)))));
        add_scaled_pair(acc[u], dlo[u], dhi[u], sc_lo, sc_hi, xq, t0, sb * 8 + 2 * pair);
      }
    }
  }
  for (int u = 0; u < G; ++u)
    for (int k = 0; k < NT; ++k) _mm512_storeu_ps(y + k * y_stride + u * step.rows, acc[u][k]);
}

// Q8_0 interleaved 16 rows at a time (ops/interleave.h) against NT
// activation rows from t0, lanes = rows: per block, eight chunks of four
// unsigned weights (value + 128) per row against four activations each; the
// +128 comes back out through -128 * the activation block's sum.
template <int NT>
SS_VNNI void interleaved_q8_tile(const uint8_t* group, const QuantizedActs& xq, int t0, float* y, int64_t y_stride) {
  const int64_t nb = xq.blocks(), cols = xq.cols;
  __m512 acc[NT];
  for (int k = 0; k < NT; ++k) acc[k] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* p = group + b * kQ8InterleavedBlockBytes;
    // Four blocks (2176 bytes) ahead, as Q4_0 reads 2304 ahead.
    prefetch_lines<kQ8InterleavedBlockBytes>(p + 4 * kQ8InterleavedBlockBytes);
    const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    __m512i d0[NT], d1[NT];  // two chains per block: half the dependent vpdpbusd latency
    for (int k = 0; k < NT; ++k) {
      d0[k] = _mm512_set1_epi32(-128 * xq.sum[static_cast<size_t>((t0 + k) * nb + b)]);
      d1[k] = _mm512_setzero_si512();
    }
    for (int j = 0; j < 8; j += 2) {
      const __m512i v0 = _mm512_loadu_si512(p + 32 + 64 * j), v1 = _mm512_loadu_si512(p + 96 + 64 * j);
      for (int k = 0; k < NT; ++k) {
        const int8_t* x = xq.q.data() + (t0 + k) * cols + b * kActBlock + 4 * j;
        int32_t x0, x1;
        std::memcpy(&x0, x, 4);
        std::memcpy(&x1, x + 4, 4);
        d0[k] = _mm512_dpbusd_epi32(d0[k], v0, _mm512_set1_epi32(x0));
        d1[k] = _mm512_dpbusd_epi32(d1[k], v1, _mm512_set1_epi32(x1));
      }
    }
    for (int k = 0; k < NT; ++k) {
      const __m512 s = _mm512_mul_ps(dw, _mm512_set1_ps(xq.d[static_cast<size_t>((t0 + k) * nb + b)]));
      acc[k] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(d0[k], d1[k])), s, acc[k]);
    }
  }
  for (int k = 0; k < NT; ++k) _mm512_storeu_ps(y + k * y_stride, acc[k]);
}

// Q6_K interleaved 16 rows at a time (ops/interleave.h) against NT
// activation rows from t0, lanes = rows. Per pair p, chunk c holds the 64
// unsigned 6-bit weights of 64p + 4c.. (low: AND 0x3F) and, with the
// nibbles of high-nibble chunk c / 2, those of 64p + 32 + 4c.. as four times
// their value (bits 6-7 selected over the nibble shifted to bits 2-5; at
// most 252, still a byte). Chunks 0-3 cover sub-blocks 4p (low) and 4p + 2
// (high), chunks 4-7 sub-blocks 4p + 1 and 4p + 3: each half of a pair runs
// two integer sums per activation row, started at -32 (high: -128) times
// their 16 activations' sum (the offset of v - 32), then scaled by d (high:
// d / 4, exact) * scale * the activation block's d straight into the row's
// float sum. Two sums per row at a time keep every accumulator in a register
// for NT = 8 (all four at once went through the stack around each vpdpbusd:
// kernels_bench 2048x2048 x64, one thread, 175 -> 287 GFLOP/s). G groups as
// in interleaved_k45_tile.
template <int NT, int G = 1>
SS_VNNI void interleaved_q6k_tile(const uint8_t* group, const QuantizedActs& xq, int t0, float* y, int64_t y_stride,
                                  GroupStep step = {}) {
  const int64_t nb = xq.blocks(), cols = xq.cols, ns = cols / kQkK;
  const bool to_l2 = q6k_prefetch_target() == PrefetchTarget::L2;
  const __m512i six = _mm512_set1_epi8(0x3F), low = _mm512_set1_epi8(0x0F), high = _mm512_set1_epi8(-16),
                top = _mm512_set1_epi8(-64);
  __m512 acc[G][NT];
  for (int u = 0; u < G; ++u)
    for (int k = 0; k < NT; ++k) acc[u][k] = _mm512_setzero_ps();
  for (int64_t sb = 0; sb < ns; ++sb) {
    const uint8_t* blk[G];
    // The rows' d (and d / 4, exact) per super-block: held in registers for
    // one group; two groups reload them per use (held, they cost the batch
    // kernel a quarter of its speed in spills).
    __m512 d[G], d4[G];
    for (int u = 0; u < G; ++u) {
      blk[u] = group + u * step.bytes + sb * kQ6KInterleavedBytes;
      if constexpr (G == 1) {
        d[u] = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk[u])));
        d4[u] = _mm512_mul_ps(d[u], _mm512_set1_ps(0.25f));
      }
    }
    for (int pair = 0; pair < 4; ++pair) {
      for (int q = 0; q < 2; ++q) {
        const int s_lo = 4 * pair + q, s_hi = s_lo + 2;  // sub-blocks of 16 in the super-block
        __m512i dlo[G][NT], dhi[G][NT];
        for (int k = 0; k < NT; ++k) {
          const size_t a16 = static_cast<size_t>((t0 + k) * 2 * nb + sb * 16);
          dlo[0][k] = _mm512_set1_epi32(-32 * xq.sum16[a16 + s_lo]);
          dhi[0][k] = _mm512_set1_epi32(-128 * xq.sum16[a16 + s_hi]);
          for (int u = 1; u < G; ++u) {
            dlo[u][k] = dlo[0][k];
            dhi[u][k] = dhi[0][k];
          }
        }
#pragma GCC unroll 2
        for (int hh = 0; hh < 2; ++hh) {
          const int h = 2 * q + hh;
          __m512i nib4[G][2];
          for (int u = 0; u < G; ++u) {
            const uint8_t* p = blk[u] + kQ6KIlPairs + kQ6KIlPairBytes * pair;
            if (t0 == 0) {  // as in interleaved_k45_tile; which cache: q6k_prefetch_target()
              const uint8_t* ahead = blk[u] + kSuperBlocksAhead<kQ6KInterleavedBytes> * kQ6KInterleavedBytes;
              prefetch_share_into<kQ6KInterleavedBytes, 16>(to_l2, ahead, 4 * pair + h);
              // From L2 then on to L1 one super-block ahead: on Zen 4 the
              // loads otherwise wait on L2 (cpu_features.h has the figures).
              if (to_l2) prefetch_share<kQ6KInterleavedBytes, 16>(blk[u] + kQ6KInterleavedBytes, 4 * pair + h);
            }
            const __m512i nib = _mm512_loadu_si512(p + q6k_il_nibbles(h));
            // Chunk 2h's nibbles (bits 0-3) or chunk 2h + 1's (bits 4-7) to bits 2-5.
            nib4[u][0] = _mm512_slli_epi16(_mm512_and_si512(nib, low), 2);
            nib4[u][1] = _mm512_srli_epi16(_mm512_and_si512(nib, high), 2);
          }
          for (int half = 0; half < 2; ++half) {
            const int c = 2 * h + half;
            __m512i w_lo[G], w_hi[G];
            for (int u = 0; u < G; ++u) {
              const __m512i v = _mm512_loadu_si512(blk[u] + kQ6KIlPairs + kQ6KIlPairBytes * pair + q6k_il_chunk(c));
              // v where `top` is set (bits 6-7), the shifted nibble elsewhere.
              w_lo[u] = _mm512_and_si512(v, six);
              w_hi[u] = _mm512_ternarylogic_epi32(v, nib4[u][half], top, 0xE4);
            }
            dot_pair(dlo, dhi, w_lo, w_hi, xq, t0, sb * kQkK + 64 * pair + 4 * c);
          }
        }
        for (int u = 0; u < G; ++u) {
          if constexpr (G > 1) {
            d[u] = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk[u])));
            d4[u] = _mm512_mul_ps(d[u], _mm512_set1_ps(0.25f));
          }
          const __m512 sc_lo = _mm512_mul_ps(
              d[u], _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(
                        _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk[u] + kQ6KIlScales + 16 * s_lo)))));
          const __m512 sc_hi = _mm512_mul_ps(
              d4[u], _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(
                         _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk[u] + kQ6KIlScales + 16 * s_hi)))));
          add_scaled_pair(acc[u], dlo[u], dhi[u], sc_lo, sc_hi, xq, t0, sb * 8 + 2 * pair);
        }
      }
    }
  }
  for (int u = 0; u < G; ++u)
    for (int k = 0; k < NT; ++k) _mm512_storeu_ps(y + k * y_stride + u * step.rows, acc[u][k]);
}

// Two groups against NT activation rows from t: the tiles' G = 2 forms
// (Q5_K has none: its fifth bits need the registers).
template <int NT>
SS_VNNI void group_pair_tile(GgmlType type, const uint8_t* group, GroupStep step, const QuantizedActs& xq, int t,
                             float* y, int64_t y_stride) {
  switch (type) {
    case GgmlType::Q4_0:
      return interleaved_tile_groups<GgmlType::Q4_0, NT, 2>(group, xq, t, y, y_stride, step);
    case GgmlType::Q8_0:
      return interleaved_tile_groups<GgmlType::Q8_0, NT, 2>(group, xq, t, y, y_stride, step);
    case GgmlType::Q4_K:
      return interleaved_k45_tile<false, NT, 2>(group, xq, t, y, y_stride, step);
    case GgmlType::Q6_K:
      return interleaved_q6k_tile<NT, 2>(group, xq, t, y, y_stride, step);
    default:
      SS_CHECK(false && "no two-group tile for this type");
  }
}

// Four far-apart Q4_0/Q8_0 groups against NT activation rows from t
// (decode).
template <int NT>
SS_VNNI void decode_group_tile(GgmlType type, const uint8_t* group, GroupStep step, const QuantizedActs& xq, int t,
                               float* y, int64_t y_stride, bool prefetch) {
  if (type == GgmlType::Q4_0)
    return interleaved_tile_groups<GgmlType::Q4_0, NT, kVnniDecodeStreams>(group, xq, t, y, y_stride, step, prefetch);
  SS_CHECK(type == GgmlType::Q8_0);
  interleaved_tile_groups<GgmlType::Q8_0, NT, kVnniDecodeStreams>(group, xq, t, y, y_stride, step);
}

// One group against NT activation rows from t (q4_0_prefetch: Q4_0's
// software prefetch).
template <int NT>
SS_VNNI void group_tile(GgmlType type, const uint8_t* group, const QuantizedActs& xq, int t, float* y, int64_t y_stride,
                        bool q4_0_prefetch) {
  switch (type) {
    case GgmlType::Q4_0:
      return interleaved_tile<NT>(group, xq, t, y, y_stride, q4_0_prefetch);
    case GgmlType::Q8_0:
      return interleaved_q8_tile<NT>(group, xq, t, y, y_stride);
    case GgmlType::Q4_K:
      return interleaved_k45_tile<false, NT>(group, xq, t, y, y_stride);
    case GgmlType::Q5_K:
      return interleaved_k45_tile<true, NT>(group, xq, t, y, y_stride);
    case GgmlType::Q6_K:
      return interleaved_q6k_tile<NT>(group, xq, t, y, y_stride);
    default:
      SS_CHECK(false && "no interleaved tile for this type");
  }
}

// Rows [r0, r1) (whole groups) of an interleaved matrix: each group is met by
// every activation row while its bytes are still in L1/L2. A tile of two or
// four groups and a single-group tile give a group the same bits (the same
// integer sums and float steps), so how a range is split never changes a
// result.
SS_VNNI void interleaved_matmul(const TensorView& w, const QuantizedActs& xq, float* y, int64_t r0, int64_t r1) {
  const int64_t rows = w.ne1;
  const GgmlType type = w.type;
  if (decoded_batch_type(type) && xq.n >= decoded_batch_min_rows(type)) return decoded_batch_matmul(w, xq, y, r0, r1);
  auto group_at = [&](int64_t g) { return rows_begin(w, g * kInterleaveRows); };
  if (xq.n < 4 && (type == GgmlType::Q4_0 || type == GgmlType::Q8_0)) {
    const bool prefetch = decode_prefetch() == DecodePrefetch::Software;
    // Decode reads every weight once, from DRAM: the range's quarters side by
    // side, so one core keeps four far-apart streams in flight where one
    // stream left memory idle. Halves came first (two streams against one):
    // TinyLlama decode on the Zen 5 VM, tok/s medians of six alternating runs:
    // Q8_0 20.8 -> 25.6 (one thread) and 32.2 -> 34.4 (two); Q4_0 40.2 -> 45.8
    // and 75.0 -> 85.2; one thread's Q8_0 decode went from 82% to 99% of a
    // plain sweep over the same weights (bench --bandwidth). Adjacent groups
    // in one pass (one wider stream) were slower: 23.1 -> 22.2. The K-quants'
    // two-group tiles (batch kernels: they prefetch both streams, and Q6_K
    // reloads its scales) made their decode slower: Q4_K_M 45.6 -> 40.4, Q6_K
    // 31.9 -> 23.8 tok/s at one thread. Groups left over when the range does
    // not split evenly go alone (below). Then quarters (four streams against
    // two): kernels_bench DecodeSweep, one thread, share of the read probe,
    // three alternating rounds: Q8_0 two streams 0.80-0.82, four 0.91-1.02
    // (eight 0.85-0.94 in an earlier sweep); Q4_0 (its prefetch in
    // interleaved_tile_groups) 0.79-0.81 -> 0.82-0.89. TinyLlama decode,
    // tok/s, alternating runs, median ratio four / two streams: Q8_0 one
    // thread 1.16 (eight runs each: 19.1 -> 22.5 tok/s medians), two threads
    // 1.06 (five runs, higher in each); Q4_0 1.05 (one thread, six runs,
    // higher or equal in each) and 1.03 (two threads, five of six runs
    // higher). Two and three sequences at one thread (bench --batch, four runs
    // each): Q8_0 1.09 and 1.07, Q4_0 1.01 and 1.03 (three rows spill
    // registers, but memory stays the bound).
    r0 = stream_range_parts<kVnniDecodeStreams>(w, r0, r1, [&](int64_t g, GroupStep step) {
      for_act_groups(xq.n, [&](int t, auto nt) {
        decode_group_tile<decltype(nt)::value>(type, group_at(g), step, xq, t, y + t * rows + g * kInterleaveRows, rows,
                                               prefetch);
      });
    });
  }
  const int64_t g0 = r0 / kInterleaveRows, g1 = (r1 + kInterleaveRows - 1) / kInterleaveRows;
  const bool q4_0_prefetch = xq.n >= 4 || decode_prefetch() == DecodePrefetch::Software;
  for (int64_t g = g0; g < g1; ++g) {
    float* yg = y + g * kInterleaveRows;
    // Batches: two adjacent groups at a time (kernels_bench, 2048 x 2048, 64
    // rows, one thread on the Zen 5 VM, GFLOP/s, alternating runs: Q4_0 467
    // -> 637, Q8_0 455 -> 627, Q4_K 452 -> 490, Q6_K 285 -> 360; Q5_K, whose
    // fifth bits need more registers, 384 -> 347-363, so it stays at one).
    if (type != GgmlType::Q5_K && xq.n >= 4 && g + 2 <= g1) {
      const GroupStep step{group_at(g + 1) - group_at(g), kInterleaveRows};
      for_act_groups<4>(xq.n, [&](int t, auto nt) {
        group_pair_tile<decltype(nt)::value>(type, group_at(g), step, xq, t, yg + t * rows, rows);
      });
      ++g;
      continue;
    }
    for_act_groups<8>(xq.n, [&](int t, auto nt) {
      group_tile<decltype(nt)::value>(type, group_at(g), xq, t, yg + t * rows, rows, q4_0_prefetch);
    });
  }
}

// A row's blocks as signed int8 (dst[b*32 + i]) and scales (dw[b * dw_stride]).
template <GgmlType T>
SS_VNNI void decode_row_ints(const uint8_t* row, int64_t nb, int8_t* dst, int64_t dst_stride, float* dw,
                             int64_t dw_stride) {
  int64_t b = 0;
  if constexpr (T == GgmlType::Q4_0) {
    // Four blocks per step: nibbles of all four in one register, then the
    // low and high halves interleaved back per block.
    const __m512i m = _mm512_set1_epi8(0x0F), eight = _mm512_set1_epi8(8);
    const __m512i first = _mm512_set_epi64(11, 10, 3, 2, 9, 8, 1, 0),
                  second = _mm512_set_epi64(15, 14, 7, 6, 13, 12, 5, 4);
    for (; b + 4 <= nb; b += 4) {
      const uint8_t* blk = row + b * 18;
      __m512i v = _mm512_castsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 2)));
      v = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 20)), 1);
      v = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 38)), 2);
      v = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 56)), 3);
      const __m512i lo = _mm512_sub_epi8(_mm512_and_si512(v, m), eight);
      const __m512i hi = _mm512_sub_epi8(_mm512_and_si512(_mm512_srli_epi16(v, 4), m), eight);
      const __m512i b01 = _mm512_permutex2var_epi64(lo, first, hi), b23 = _mm512_permutex2var_epi64(lo, second, hi);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + b * dst_stride), _mm512_castsi512_si256(b01));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + (b + 1) * dst_stride), _mm512_extracti64x4_epi64(b01, 1));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + (b + 2) * dst_stride), _mm512_castsi512_si256(b23));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + (b + 3) * dst_stride), _mm512_extracti64x4_epi64(b23, 1));
      for (int j = 0; j < 4; ++j) {
        uint16_t h;
        std::memcpy(&h, blk + j * 18, 2);
        dw[(b + j) * dw_stride] = _cvtsh_ss(h);
      }
    }
  }
  for (; b < nb; ++b) {
    const uint8_t* blk = row + b * kBlockBytes<T>;
    uint16_t h;
    std::memcpy(&h, blk, 2);
    dw[b * dw_stride] = _cvtsh_ss(h);
    if constexpr (T == GgmlType::Q4_0) {
      const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 2));
      const __m128i m = _mm_set1_epi8(0x0F), eight = _mm_set1_epi8(8);
      const __m128i lo = _mm_sub_epi8(_mm_and_si128(v, m), eight);
      const __m128i hi = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(v, 4), m), eight);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + b * dst_stride), _mm256_set_m128i(hi, lo));
    } else {
      std::memcpy(dst + b * dst_stride, blk + 2, kActBlock);
    }
  }
}

// A Q4_K (Q5_K: kFive) row's sub-blocks as int8 0..15 (0..31)
// (dst[b*dst_stride + i]), scales d*sc and mins dmin*m (dw, mn [b * dw_stride]).
template <bool kFive>
SS_VNNI void decode_row_ints_q4k(const uint8_t* row, int64_t nb, int8_t* dst, int64_t dst_stride, float* dw, float* mn,
                                 int64_t dw_stride) {
  const __m256i low = _mm256_set1_epi8(0x0F), one = _mm256_set1_epi8(1);
  for (int64_t sb = 0; sb * 8 < nb; ++sb) {
    const uint8_t* blk = row + sb * (kFive ? kQ5_KBytes : kQ4_KBytes);
    uint16_t hd[2];
    std::memcpy(hd, blk, 4);
    const float d = _cvtsh_ss(hd[0]), dmin = _cvtsh_ss(hd[1]);
    uint8_t sc[8], m[8];
    kquant_scales_mins(blk + 4, sc, m);
    for (int j = 0; j < 8; ++j) {
      dw[(sb * 8 + j) * dw_stride] = d * static_cast<float>(sc[j]);
      mn[(sb * 8 + j) * dw_stride] = dmin * static_cast<float>(m[j]);
    }
    const __m256i qh = kFive ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 16)) : _mm256_setzero_si256();
    for (int g = 0; g < 4; ++g) {
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + (kFive ? 48 : 16) + 32 * g));
      __m256i lo = _mm256_and_si256(v, low), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low);
      if constexpr (kFive) {
        const __m256i b_lo = _mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(2 * g)), one);
        const __m256i b_hi = _mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(2 * g + 1)), one);
        lo = _mm256_or_si256(lo, _mm256_slli_epi16(b_lo, 4));
        hi = _mm256_or_si256(hi, _mm256_slli_epi16(b_hi, 4));
      }
      int8_t* out = dst + (sb * 8 + 2 * g) * dst_stride;
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), lo);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + dst_stride), hi);
    }
  }
}

// AMX: C[16 weight rows][16 activation rows] per block of 32, one tdpbssd
// (weights as signed int8 in A, activations VNNI-packed in B), then scaled by
// d_w (per row) * d_x (per activation) into float sums. Two weight tiles meet
// two activation groups per block (four products from four tile loads), since
// tile traffic, not the multiplies, sets the pace: every product must be
// stored for its per-block scaling.

// Scales block b's four integer products (tile t = weight tile t / 2,
// activation group t % 2; C rows = weight rows, lanes = activations) into the
// float sums acc [4][16][16].
// With kMins (Q4_K, Q5_K), each also subtracts the weight row's min times the
// activation block's d * sum.
template <bool kMins>
SS_AMX __attribute__((always_inline)) inline void amx_scale4(const int32_t (*c)[16][16], const float* dx0,
                                                             const float* dx1, const float* dw0, const float* dw1,
                                                             const float* ds0, const float* ds1, const float* mn0,
                                                             const float* mn1, float (*__restrict acc)[16][16]) {
  for (int t = 0; t < 4; ++t) {
    const __m512 dxv = _mm512_loadu_ps(t & 1 ? dx1 : dx0);
    const float* dw = t & 2 ? dw1 : dw0;
    for (int m = 0; m < 16; ++m) {
      const __m512 s = _mm512_mul_ps(dxv, _mm512_set1_ps(dw[m]));
      __m512 a = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(c[t][m])), s, _mm512_load_ps(acc[t][m]));
      if constexpr (kMins)
        a = _mm512_fnmadd_ps(_mm512_set1_ps((t & 2 ? mn1 : mn0)[m]), _mm512_loadu_ps(t & 1 ? ds1 : ds0), a);
      _mm512_store_ps(acc[t][m], a);
    }
  }
}

template <bool kFive>
SS_VNNI void decode_k45_group_interleaved(const uint8_t* group, int64_t nb, int8_t* wq, float* dw, float* mn) {
  constexpr int64_t kBytes = kFive ? kQ5KInterleavedBytes : kQ4KInterleavedBytes;
  for (int64_t s = 0; s * 8 < nb; ++s)
    interleaved_k45_superblock_rows<kFive>(group + s * kBytes, wq + s * 8 * 512, dw + s * 8 * 16, mn + s * 8 * 16);
}

// One interleaved group (16 rows) of a Q4_0/Q8_0/Q4_K/Q5_K matrix as int8 A
// tiles (wq [nb][16][32]), scales (dw [nb][16]) and, for Q4_K/Q5_K, mins (mn
// [nb][16]): the same values decode_row_ints(_q4k) give from the plain rows.
SS_VNNI void decode_group_interleaved(GgmlType type, const uint8_t* group, int64_t nb, int8_t* wq, float* dw,
                                      float* mn) {
  switch (type) {
    case GgmlType::Q4_0:
      for (int64_t b = 0; b < nb; ++b)
        interleaved_block_rows(group + b * kInterleavedBlockBytes, wq + b * 512, dw + b * 16);
      return;
    case GgmlType::Q8_0:
      for (int64_t b = 0; b < nb; ++b)
        interleaved_q8_block_rows(group + b * kQ8InterleavedBlockBytes, wq + b * 512, dw + b * 16);
      return;
    case GgmlType::Q4_K:
      return decode_k45_group_interleaved<false>(group, nb, wq, dw, mn);
    case GgmlType::Q5_K:
      return decode_k45_group_interleaved<true>(group, nb, wq, dw, mn);
    default:
      SS_CHECK(false && "no int8 tiles for this type");
  }
}

}  // namespace

// Blocks [b0, b0 + count) (count < 0: to the row's end) of weight rows [rt,
// rt + 16) of a Q4_0/Q8_0/Q4_K/Q5_K matrix as int8 A tiles (wq
// [count][16][32]), their scales (dw [count][16]) and, for Q4_K/Q5_K, their
// mins (mn [count][16]); rows from `end` on are 0. K-quants start at a
// super-block (b0 % 8 == 0).
void int8_tile_rows(const TensorView& w, int64_t rt, int64_t end, int8_t* wq, float* dw, float* mn, int64_t b0,
                    int64_t count) {
  const int64_t nb = count < 0 ? w.ne0 / kActBlock - b0 : count;
  SS_CHECK(b0 >= 0 && b0 + nb <= w.ne0 / kActBlock && (!k45(w.type) || b0 % 8 == 0));
  // Byte offset of block b0 in a plain row and in an interleaved group.
  const size_t in_row = row_bytes(w.type, b0 * kActBlock);
  const int64_t in_group = w.type == GgmlType::Q4_0   ? b0 * kInterleavedBlockBytes
                           : w.type == GgmlType::Q8_0 ? b0 * kQ8InterleavedBlockBytes
                           : w.type == GgmlType::Q4_K ? b0 / 8 * kQ4KInterleavedBytes
                                                      : b0 / 8 * kQ5KInterleavedBytes;
  // Interleaved: end is a whole group's.
  if (tiles_read_interleaved(w) && rt + 16 <= end)
    return decode_group_interleaved(w.type, rows_begin(w, rt) + in_group, nb, wq, dw, mn);
  for (int m = 0; m < 16; ++m) {
    if (rt + m < end) {
      const uint8_t* row = w.row(rt + m) + in_row;
      if (w.type == GgmlType::Q4_0)
        decode_row_ints<GgmlType::Q4_0>(row, nb, wq + m * kActBlock, 512, dw + m, 16);
      else if (w.type == GgmlType::Q8_0)
        decode_row_ints<GgmlType::Q8_0>(row, nb, wq + m * kActBlock, 512, dw + m, 16);
      else if (w.type == GgmlType::Q4_K)
        decode_row_ints_q4k<false>(row, nb, wq + m * kActBlock, 512, dw + m, mn + m, 16);
      else
        decode_row_ints_q4k<true>(row, nb, wq + m * kActBlock, 512, dw + m, mn + m, 16);
    } else {
      for (int64_t b = 0; b < nb; ++b) {
        std::memset(wq + b * 512 + m * kActBlock, 0, kActBlock);
        dw[b * 16 + m] = 0;
        mn[b * 16 + m] = 0;
      }
    }
  }
}

namespace {

// The last step's products in amx_matmul, scaled (amx_scale4's arguments)
// once this step's are stored: loads straight after a tile store would wait
// for it to reach the cache.
struct AmxPending {
  const int32_t (*c)[16][16] = nullptr;  // none yet
  const float *dx0, *dx1, *dw0, *dw1, *ds0, *ds1, *mn0, *mn1;
  float (*acc)[16][16];
};

template <bool kMins>
SS_AMX __attribute__((always_inline)) inline void scale_pending(const AmxPending& p) {
  if (p.c != nullptr) amx_scale4<kMins>(p.c, p.dx0, p.dx1, p.dw0, p.dw1, p.ds0, p.ds1, p.mn0, p.mn1, p.acc);
}

// The group paired with group g: the next, or g itself for an odd last one.
inline int pair_partner(int g, int groups) { return g + 1 < groups ? g + 1 : g; }

template <bool kMins>
SS_AMX void amx_matmul(const TensorView& w, const QuantizedActs& xq, float* y, int64_t r0, int64_t r1) {
  const int64_t nb = xq.blocks(), rows = w.ne1;
  // Tiles 0-3: C (16 x 16 int32), tile 2 * wt + ag for weight tile wt and
  // activation group ag; 4, 5: A (16 weight rows x 32 int8) of weight tiles
  // 0, 1; 6, 7: B (8 x (16 activations x 4 int8)) of groups 0, 1.
  TileConfig cfg;
  for (int tile : {0, 1, 2, 3}) cfg.set(tile, 16, 64);
  for (int tile : {4, 5}) cfg.set(tile, 16, 32);
  for (int tile : {6, 7}) cfg.set(tile, 8, 64);
  _tile_loadconfig(&cfg);
  const int groups = (xq.n + 15) / 16, pairs = (groups + 1) / 2;
  // A strip's weights are decoded a super-block (8 blocks) at a time, and
  // each chunk meets every pair of activation groups while it is in L1.
  // Against the whole strip decoded at once and met by one pair after the
  // other (kernels_bench 2048 x 2048, both builds running at once, one per
  // core, three rounds): Q4_K and Q5_K +21-34% at 64 rows and +15-26% at
  // 128-256, Q4_0 and Q8_0 +13-18% at 32 rows, +6-8% at 64 (Q8_0 once
  // even), and within 4% either way at 128-256.
  constexpr int64_t kChunk = 8;
  alignas(64) int8_t wq[2][kChunk * 512];  // the chunk's A tiles of weight tiles 0, 1: [block][16][32]
  // Its scales and mins, [chunk parity][weight tile][block][row]: a product
  // is scaled after the next one is stored, which may be the next chunk's.
  alignas(64) float dws[2][2][kChunk * 16], mns[2][2][kChunk * 16];
  thread_local AlignedVector<float> sums;  // [pairs][4][16][16]: each pair's float sums
  sums.resize(static_cast<size_t>(pairs) * 1024);
  auto* const acc = reinterpret_cast<float(*)[4][16][16]>(sums.data());
  alignas(64) int32_t cbuf[2][4][16][16];  // the products of this step and the last
  for (int64_t rt = r0; rt < r1; rt += 32) {
    StripPrefetch prefetch(w, rt, r1, static_cast<int64_t>(pairs) * nb);
    std::fill(sums.begin(), sums.end(), 0.0f);
    AmxPending pending;
    int step = 0;
    for (int64_t b0 = 0; b0 < nb; b0 += kChunk) {
      const int64_t nc = std::min(kChunk, nb - b0);
      const int par = static_cast<int>((b0 / kChunk) & 1);
      // A strip of 16 rows (the end of W or of this range) multiplies zeros
      // in its second tile rather than needing a second kernel.
      int8_tile_rows(w, rt, r1, wq[0], dws[par][0], mns[par][0], b0, nc);
      int8_tile_rows(w, rt + 16, r1, wq[1], dws[par][1], mns[par][1], b0, nc);
      for (int pr = 0; pr < pairs; ++pr) {
        // An odd last group is paired with itself; its second products are
        // never written out.
        const int g = 2 * pr, g1 = pair_partner(g, groups);
        const int8_t* bq0 = xq.packed.data() + (g * nb + b0) * 512;
        const int8_t* bq1 = xq.packed.data() + (g1 * nb + b0) * 512;
        const int64_t o0 = (g * nb + b0) * 16, o1 = (g1 * nb + b0) * 16;
        // Meanwhile the next strip's weights come in from memory. (GCC's
        // tile intrinsics need literal tile numbers, hence no loop over
        // tiles.)
        for (int64_t k = 0; k < nc; ++k, ++step) {
          _tile_loadd(4, wq[0] + k * 512, kActBlock);
          _tile_loadd(5, wq[1] + k * 512, kActBlock);
          _tile_loadd(6, bq0 + k * 512, 64);
          _tile_loadd(7, bq1 + k * 512, 64);
          _tile_zero(0);
          _tile_zero(1);
          _tile_zero(2);
          _tile_zero(3);
          _tile_dpbssd(0, 4, 6);
          _tile_dpbssd(1, 4, 7);
          _tile_dpbssd(2, 5, 6);
          _tile_dpbssd(3, 5, 7);
          int32_t(*c)[16][16] = cbuf[step & 1];
          _tile_stored(0, c[0], 64);
          _tile_stored(1, c[1], 64);
          _tile_stored(2, c[2], 64);
          _tile_stored(3, c[3], 64);
          scale_pending<kMins>(pending);
          pending = {c,
                     xq.packed_d.data() + o0 + k * 16,
                     xq.packed_d.data() + o1 + k * 16,
                     dws[par][0] + k * 16,
                     dws[par][1] + k * 16,
                     xq.packed_dsum.data() + o0 + k * 16,
                     xq.packed_dsum.data() + o1 + k * 16,
                     mns[par][0] + k * 16,
                     mns[par][1] + k * 16,
                     acc[pr]};
          prefetch.step();
        }
      }
    }
    scale_pending<kMins>(pending);
    for (int pr = 0; pr < pairs; ++pr)
      store_strip_sums(acc[pr], 2 * pr, pair_partner(2 * pr, groups), xq.n, rt, r1, rows, y);
  }
  _tile_release();
}

}  // namespace

namespace {

SS_VNNI void quantize_block_vnni(const float* x, int8_t* q, float* d_out, int32_t* half_sums) {
  const __m512 a = _mm512_loadu_ps(x), b = _mm512_loadu_ps(x + 16);
  const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(a), _mm512_abs_ps(b)));
  const float d = amax / 127.0f;
  const __m512 id = _mm512_set1_ps(d > 0 ? 1.0f / d : 0.0f);
  // Round to nearest even (the default rounding mode), as nearbyint does.
  const __m512i qa = _mm512_cvtps_epi32(_mm512_mul_ps(a, id)), qb = _mm512_cvtps_epi32(_mm512_mul_ps(b, id));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(q), _mm512_cvtsepi32_epi8(qa));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(q + 16), _mm512_cvtsepi32_epi8(qb));
  *d_out = d;
  half_sums[0] = _mm512_reduce_add_epi32(qa);
  half_sums[1] = _mm512_reduce_add_epi32(qb);
}

}  // namespace

namespace {
void quantize_block(const float* x, int8_t* q, float* d_out, int32_t* half_sums) {
  if (cpu_has_vnni())
    quantize_block_vnni(x, q, d_out, half_sums);
  else if (cpu_usable(kCpuAvx2))
    quantize_block_avx2(x, q, d_out, half_sums);
  else
    quantize_block_scalar(x, q, d_out, half_sums);
}
}  // namespace

Int8Layout int8_layout(const TensorView& w) {
  // Whole blocks per row: 32 weights for Q4_0/Q8_0, 256 for the K-quants.
  const bool vnni = cpu_has_vnni();
  if (!int8_type(w.type) || !(vnni || cpu_usable(kCpuAvx2)) ||
      w.ne0 % type_traits(static_cast<uint32_t>(w.type))->block_elems != 0)
    return Int8Layout::None;
  if (can_interleave(w)) return Int8Layout::Interleaved;
  return vnni || int8_avx2_plain_type(w.type) ? Int8Layout::Plain : Int8Layout::None;
}

bool int8_matmul_supported(const TensorView& w) {
  const Int8Layout l = int8_layout(w);
  if (l == Int8Layout::None) return false;
  return cpu_has_vnni() || int8_avx2_plain_type(w.type) || w.interleaved != nullptr;
}

void matmul_int8_rows(const TensorView& w, const QuantizedActs& xq, float* y, int64_t r0, int64_t r1) {
  SS_CHECK(int8_matmul_supported(w) && xq.cols == w.ne0);
  // Without AVX-512 VNNI: AVX2 (Q4_0 and Q8_0 interleaved or plain, the
  // K-quants interleaved), with AVX-VNNI's vpdpbusd where the CPU has it.
  if (!cpu_has_vnni())
    return cpu_usable(kCpuAvxVnni) ? matmul_int8_avxvnni_rows(w, xq, y, r0, r1)
                                   : matmul_int8_avx2_rows(w, xq, y, r0, r1);
  // Below its type's amx_min_rows, a batch packed for AMX takes VNNI (the
  // interleaved kernels and the plain K-quant ones read q, which is filled
  // for both layouts).
  const bool amx = xq.amx && int8_uses_amx(w, xq.n);
  if (w.interleaved != nullptr && !amx) return interleaved_matmul(w, xq, y, r0, r1);
  if (amx) return k45(w.type) ? amx_matmul<true>(w, xq, y, r0, r1) : amx_matmul<false>(w, xq, y, r0, r1);
  if (w.type == GgmlType::Q6_K) return vnni_matmul<GgmlType::Q6_K>(w, xq, y, r0, r1);
  if (w.type == GgmlType::Q4_K) return vnni_matmul<GgmlType::Q4_K>(w, xq, y, r0, r1);
  if (w.type == GgmlType::Q5_K) return vnni_matmul<GgmlType::Q5_K>(w, xq, y, r0, r1);
  if (w.type == GgmlType::Q4_0)
    vnni_matmul<GgmlType::Q4_0>(w, xq, y, r0, r1);
  else
    vnni_matmul<GgmlType::Q8_0>(w, xq, y, r0, r1);
}

bool int8_uses_amx(const TensorView& w, int n) { return n >= amx_min_rows(w.type) && amx_enabled(); }

const char* int8_kernels() {
  if (!cpu_has_vnni()) return cpu_usable(kCpuAvxVnni) ? "avx-vnni" : cpu_usable(kCpuAvx2) ? "avx2" : "none";
  return amx_enabled() ? "amx+avx512-vnni" : "avx512-vnni";
}

namespace {
bool amx_for_batches() { return amx_enabled(); }
}  // namespace

#else  // no x86: the float path only

namespace {
void quantize_block(const float* x, int8_t* q, float* d_out, int32_t* half_sums) {
  quantize_block_scalar(x, q, d_out, half_sums);
}
}  // namespace

bool int8_matmul_supported(const TensorView&) { return false; }
void matmul_int8_rows(const TensorView& w, const QuantizedActs& xq, float* y, int64_t, int64_t) {
  SS_CHECK(false && "int8 matmul without a kernel");
}
bool int8_uses_amx(const TensorView&, int) { return false; }
void int8_tile_rows(const TensorView&, int64_t, int64_t, int8_t*, float*, float*, int64_t, int64_t) {
  SS_CHECK(false && "int8 tiles without a kernel");
}
Int8Layout int8_layout(const TensorView&) { return Int8Layout::None; }
const char* int8_kernels() { return "none"; }

namespace {
bool amx_for_batches() { return false; }
}  // namespace

#endif

}  // namespace ss
