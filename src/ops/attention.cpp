#include "ops/attention.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>
#include <vector>

#include "ops/clones.h"
#include "ops/fast_exp.h"
#include "ops/lanes.h"
#include "util/check.h"
#include "util/fp16.h"

namespace ss {

namespace {
constexpr int kChunk = kAttnChunk;

// The scores of one chunk of keys live in one 16-lane vector, so scores,
// max, exp and sum over keys are lane-parallel.
static_assert(kChunk == sizeof(Lanes) / sizeof(float));

#define SS_ALWAYS_INLINE __attribute__((always_inline)) inline

SS_ALWAYS_INLINE Lanes load_lanes(const float* p) {
  Lanes v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

typedef float Eight __attribute__((vector_size(8 * sizeof(float))));

SS_ALWAYS_INLINE Eight load8(const float* p) {
  Eight v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// IEEE half bits (widened to 32-bit lanes) to float, exactly: the exponent
// and mantissa shifted into float position are a float 2^-112 times the
// value (normals and subnormals alike), infinities and NaNs keep all ones.
template <class F, class U>
SS_ALWAYS_INLINE F half_bits_to_float(U w) {
  const U em = (w & 0x7fffu) << 13;
  U bits = __builtin_bit_cast(U, __builtin_bit_cast(F, em) * 0x1p112f);
  // Infinities and NaNs: the exponent set to all ones over the same
  // mantissa. The mask comes from arithmetic (exponent 31 + 1 carries into
  // bit 15), not a compare: GCC compiles a 16-lane compare (or ?:) to a
  // scalar compare per lane in the AVX2 clone.
  bits |= (0u - (((w & 0x7c00u) + 0x0400u) >> 15)) & 0x7f800000u;
  return __builtin_bit_cast(F, bits | ((w & 0x8000u) << 16));
}

// How a cache element type is read: 16 or 8 consecutive elements into float
// lanes, or one.
struct F32Elems {
  using T = float;
  static SS_ALWAYS_INLINE Lanes load16(const T* p) { return load_lanes(p); }
  static SS_ALWAYS_INLINE Eight load8(const T* p) { return ::ss::load8(p); }
  static SS_ALWAYS_INLINE Lanes load8x2(const T* a, const T* b) {
    return __builtin_shufflevector(::ss::load8(a), ::ss::load8(b), 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14,
                                   15);
  }
  static SS_ALWAYS_INLINE float one(const T* p) { return *p; }
};
// Half floats by the exact bit conversion above (the clones cannot inline
// F16C intrinsics: ops/clones.h).
struct F16Elems {
  using T = uint16_t;
  typedef uint16_t H16 __attribute__((vector_size(16 * sizeof(uint16_t))));
  typedef uint16_t H8 __attribute__((vector_size(8 * sizeof(uint16_t))));
  typedef uint32_t U16 __attribute__((vector_size(16 * sizeof(uint32_t))));
  typedef uint32_t U8 __attribute__((vector_size(8 * sizeof(uint32_t))));
  static SS_ALWAYS_INLINE Lanes load16(const T* p) {
    H16 h;
    std::memcpy(&h, p, sizeof h);
    return half_bits_to_float<Lanes>(__builtin_convertvector(h, U16));
  }
  static SS_ALWAYS_INLINE Eight load8(const T* p) {
    H8 h;
    std::memcpy(&h, p, sizeof h);
    return half_bits_to_float<Eight>(__builtin_convertvector(h, U8));
  }
  static SS_ALWAYS_INLINE H16 halves8x2(const T* a, const T* b) {
    H8 x, y;
    std::memcpy(&x, a, sizeof x);
    std::memcpy(&y, b, sizeof y);
    return __builtin_shufflevector(x, y, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  }
  static SS_ALWAYS_INLINE Lanes load8x2(const T* a, const T* b) {
    return half_bits_to_float<Lanes>(__builtin_convertvector(halves8x2(a, b), U16));
  }
  static SS_ALWAYS_INLINE float one(const T* p) { return fp16_to_fp32(*p); }
};
// GCC only: clang checks an asm operand's size against the target of the
// function it is written in (the clones' shared source, no AVX) and rejects
// it; clang builds keep the bit conversion (the same values).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define SS_F16C_ASM 1
// Half floats in the AVX2 and AVX-512 clones (kZmm): vcvtph2ps, one
// instruction where the bit conversion takes ten, through inline assembly
// (ops/clones.h: the clones' shared code cannot inline the F16C
// intrinsics). Exact, as the bit conversion is: the clones' results do not
// change. The AVX2 clone converts 8-lane rows only: GCC moves a 16-lane
// vector put together from two asm results through the stack element by
// element, slower than the bit conversion's vector operations.
template <bool kZmm>
struct F16cElems {
  using T = uint16_t;
  // The rows' halves as asm memory operands, at the 2-byte alignment they have.
  typedef uint16_t H8 __attribute__((vector_size(16), aligned(2)));
  typedef uint16_t H16 __attribute__((vector_size(32), aligned(2)));
  static SS_ALWAYS_INLINE Eight load8(const T* p) {
    Eight out;
    asm("vcvtph2ps %1, %0" : "=x"(out) : "m"(*reinterpret_cast<const H8*>(p)));
    return out;
  }
  static SS_ALWAYS_INLINE Lanes load16(const T* p) {
    if constexpr (kZmm) {
      Lanes out;
      asm("vcvtph2ps %1, %0" : "=v"(out) : "m"(*reinterpret_cast<const H16*>(p)));
      return out;
    } else {
      return F16Elems::load16(p);
    }
  }
  static SS_ALWAYS_INLINE Lanes load8x2(const T* a, const T* b) {
    if constexpr (kZmm)
      return __builtin_shufflevector(load8(a), load8(b), 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    else
      return F16Elems::load8x2(a, b);
  }
  static SS_ALWAYS_INLINE float one(const T* p) { return fp16_to_fp32(*p); }
};
#endif

// Scores' differences from their max below this give probability 0
// (exp_nonpositive below).
constexpr float kExpFloor = -69.0f;

#ifdef SS_F16C_ASM
// exp(x) of scores' differences from their max (x <= 0, or -inf for a masked
// lane) in the AVX-512 clone, 0 below kExpFloor as exp_nonpositive: fast_exp's
// reduction and polynomial, with 2^k applied by vscalefps (through inline
// assembly, as vcvtph2ps above), which needs no clamp above and no
// exponent-bit arithmetic (the same values as fast_exp::exp_clamped).
SS_ALWAYS_INLINE Lanes exp_nonpositive_avx512(Lanes x) {
  const Lanes in = x;
  x = x > kExpFloor ? x : Lanes{} + kExpFloor;  // no -inf into the reduction
  const fast_exp::ExpParts<Lanes> e = fast_exp::exp_parts(x);
  const Lanes p = e.p, k = e.k;
  Lanes out;
  asm("vscalefps %2, %1, %0" : "=v"(out) : "v"(p), "v"(k));
  using Mask = decltype(in < kExpFloor);
  return __builtin_bit_cast(Lanes, ~(in < kExpFloor) & __builtin_bit_cast(Mask, out));
}
#define SS_EXP_SCALEF 1
#endif

// The element loader a clone at level L reads a cache of element type E with.
template <class E, CloneLevel L>
struct ClonedElems {
  using type = E;
};
#ifdef SS_F16C_ASM
template <CloneLevel L>
struct ClonedElems<F16Elems, L> {
  using type = F16cElems<L == CloneLevel::Avx512>;
};
template <>
struct ClonedElems<F16Elems, CloneLevel::Baseline> {
  using type = F16Elems;
};
#endif

struct BF16Elems {
  using T = uint16_t;
  using H16 = F16Elems::H16;
  using H8 = F16Elems::H8;
  using U16 = F16Elems::U16;
  using U8 = F16Elems::U8;
  static SS_ALWAYS_INLINE Lanes load16(const T* p) {
    H16 h;
    std::memcpy(&h, p, sizeof h);
    return __builtin_bit_cast(Lanes, __builtin_convertvector(h, U16) << 16);
  }
  static SS_ALWAYS_INLINE Eight load8(const T* p) {
    H8 h;
    std::memcpy(&h, p, sizeof h);
    return __builtin_bit_cast(Eight, __builtin_convertvector(h, U8) << 16);
  }
  static SS_ALWAYS_INLINE Lanes load8x2(const T* a, const T* b) {
    return __builtin_bit_cast(Lanes, __builtin_convertvector(F16Elems::halves8x2(a, b), U16) << 16);
  }
  static SS_ALWAYS_INLINE float one(const T* p) { return bf16_to_fp32(*p); }
};

// Horizontal max / sum as a fixed halving tree (order fixed, so results do
// not depend on the clone).
SS_ALWAYS_INLINE float lanes_max(Lanes t) {
  t = __builtin_shufflevector(t, t, 8, 9, 10, 11, 12, 13, 14, 15, 0, 0, 0, 0, 0, 0, 0, 0) > t
          ? __builtin_shufflevector(t, t, 8, 9, 10, 11, 12, 13, 14, 15, 0, 0, 0, 0, 0, 0, 0, 0)
          : t;
  t = __builtin_shufflevector(t, t, 4, 5, 6, 7, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0) > t
          ? __builtin_shufflevector(t, t, 4, 5, 6, 7, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
          : t;
  const float a = t[0] > t[2] ? t[0] : t[2], b = t[1] > t[3] ? t[1] : t[3];
  return a > b ? a : b;
}
SS_ALWAYS_INLINE float lanes_sum(Lanes t) {
  t += __builtin_shufflevector(t, t, 8, 9, 10, 11, 12, 13, 14, 15, 0, 0, 0, 0, 0, 0, 0, 0);
  t += __builtin_shufflevector(t, t, 4, 5, 6, 7, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
  return (t[0] + t[2]) + (t[1] + t[3]);
}
// The same trees over a chunk held as two 8-lane halves (lo: lanes 0-7):
// their first step is lo against hi, so the results are lanes_max's and
// lanes_sum's bit for bit.
SS_ALWAYS_INLINE float halves_max(Eight lo, Eight hi) {
  Eight t = hi > lo ? hi : lo;
  t = __builtin_shufflevector(t, t, 4, 5, 6, 7, 0, 0, 0, 0) > t ? __builtin_shufflevector(t, t, 4, 5, 6, 7, 0, 0, 0, 0)
                                                                : t;
  const float a = t[0] > t[2] ? t[0] : t[2], b = t[1] > t[3] ? t[1] : t[3];
  return a > b ? a : b;
}
SS_ALWAYS_INLINE float halves_sum(Eight lo, Eight hi) {
  Eight t = lo + hi;
  t += __builtin_shufflevector(t, t, 4, 5, 6, 7, 0, 0, 0, 0);
  return (t[0] + t[2]) + (t[1] + t[3]);
}

// s[r] = scale * sum_d q[d] * k_cols[d*col_stride + r] for the kChunk keys
// from k_cols; four interleaved sums over d keep the FMA chains short for big
// heads.
template <int HD, class E = F32Elems>
SS_ALWAYS_INLINE Lanes chunk_scores(const float* q, const typename E::T* k_cols, int col_stride, int hd_runtime,
                                    float scale) {
  const int hd = HD > 0 ? HD : hd_runtime;
  Lanes a[4] = {};
  int d = 0;
  for (; d + 4 <= hd; d += 4)
    for (int j = 0; j < 4; ++j) a[j] += q[d + j] * E::load16(k_cols + static_cast<long>(d + j) * col_stride);
  for (; d < hd; ++d) a[0] += q[d] * E::load16(k_cols + static_cast<long>(d) * col_stride);
  return ((a[0] + a[1]) + (a[2] + a[3])) * scale;
}

// chunk_scores for NH heads at once (q [NH][hd]): each K row is loaded once
// for all of them, and the NH sums are the independent chains.
template <int HD, int NH, class E = F32Elems>
SS_ALWAYS_INLINE void chunk_scores_heads(const float* q, const typename E::T* k_cols, int col_stride, int hd_runtime,
                                         float scale, Lanes* out) {
  const int hd = HD > 0 ? HD : hd_runtime;
  // Two chains per head (even and odd d) for up to two heads, and for four
  // heads of 32 or more dimensions, so the sums do not wait on one
  // multiply-add after another (four chains leave half the FMA issue idle).
  constexpr int C = NH <= 2 || (NH == 4 && HD >= 32) ? 2 : 1;
  Lanes a[NH][C] = {};
  int d = 0;
  for (; d + C <= hd; d += C)
    for (int c = 0; c < C; ++c) {
      const Lanes k = E::load16(k_cols + static_cast<long>(d + c) * col_stride);
      for (int h = 0; h < NH; ++h) a[h][c] += q[h * hd + d + c] * k;
    }
  for (; d < hd; ++d) {
    const Lanes k = E::load16(k_cols + static_cast<long>(d) * col_stride);
    for (int h = 0; h < NH; ++h) a[h][0] += q[h * hd + d] * k;
  }
  for (int h = 0; h < NH; ++h) {
    Lanes sum = a[h][0];
    for (int c = 1; c < C; ++c) sum += a[h][c];
    out[h] = sum * scale;
  }
}

// chunk_scores_heads with the chunk as two 8-lane halves (out[h][0]: keys
// 0-7): what the AVX2 clone runs, since GCC moves 16-lane vectors built from
// parts, and 16-lane compares, through the stack element by element where
// the registers are 8 lanes wide. One or two heads: two chains per half.
template <int HD, int NH, class E>
SS_ALWAYS_INLINE void chunk_scores_heads8(const float* q, const typename E::T* k_cols, int col_stride, int hd_runtime,
                                          float scale, Eight (*out)[2]) {
  const int hd = HD > 0 ? HD : hd_runtime;
  constexpr int C = NH <= 2 ? 2 : 1;
  Eight a[NH][2][C] = {};
  int d = 0;
  for (; d + C <= hd; d += C)
    for (int c = 0; c < C; ++c) {
      const typename E::T* row = k_cols + static_cast<long>(d + c) * col_stride;
      const Eight k0 = E::load8(row), k1 = E::load8(row + 8);
      for (int h = 0; h < NH; ++h) {
        const float qv = q[h * hd + d + c];
        a[h][0][c] += qv * k0;
        a[h][1][c] += qv * k1;
      }
    }
  for (; d < hd; ++d) {
    const typename E::T* row = k_cols + static_cast<long>(d) * col_stride;
    const Eight k0 = E::load8(row), k1 = E::load8(row + 8);
    for (int h = 0; h < NH; ++h) {
      a[h][0][0] += q[h * hd + d] * k0;
      a[h][1][0] += q[h * hd + d] * k1;
    }
  }
  for (int h = 0; h < NH; ++h)
    for (int half = 0; half < 2; ++half) {
      Eight sum = a[h][half][0];
      for (int c = 1; c < C; ++c) sum += a[h][half][c];
      out[h][half] = sum * scale;
    }
}
}  // namespace

namespace {
SS_CLONE_IMPL void attn_scores_impl(const float* q, const float* k_cols, int col_stride, int count, int hd, float scale,
                                    float* scores) {
  int r0 = 0;
  for (; r0 + kChunk <= count; r0 += kChunk) {
    const Lanes s = chunk_scores<0>(q, k_cols + r0, col_stride, hd, scale);
    std::memcpy(scores + r0, &s, sizeof s);
  }
  // The last few keys one by one, as the scalar twin scores them.
  attn_scores_scalar(q, k_cols + r0, col_stride, count - r0, hd, scale, scores + r0);
}

SS_CLONE_IMPL void attn_accumulate_impl(const float* probs, const float* v_rows, int stride, int count, int hd,
                                        float* __restrict__ acc) {
  for (int r = 0; r < count; ++r) {
    const float p = probs[r];
    const float* __restrict__ v = v_rows + static_cast<long>(r) * stride;
    for (int d = 0; d < hd; ++d) acc[d] += p * v[d];
  }
}
}  // namespace

SS_CLONED(void, attn_scores,
          (const float* q, const float* k_cols, int col_stride, int count, int hd, float scale, float* scores),
          (q, k_cols, col_stride, count, hd, scale, scores))
SS_CLONED(void, attn_accumulate, (const float* probs, const float* v_rows, int stride, int count, int hd, float* acc),
          (probs, v_rows, stride, count, hd, acc))

namespace {
// exp of the scores' differences from their max (x <= 0), exactly 0 below
// kExpFloor. A probability under e^-69 (~1e-30, below 2^-99) of the max's
// changes no float sum that holds the max's own 1, but multiplied by a
// value it may fall below 2^-126, into the subnormal range, where every
// multiply-add takes a microcode assist of ~100 cycles: long contexts have
// thousands of such keys per head, and stories260K decode at 2000 keys spent
// 40-60% of its time in them (with FTZ/DAZ set: 336-394 -> 155-209 us).
// The floor is a mask and-ed onto the result: GCC turned a vector ?: here,
// inlined into a caller's own ?:, into a compare and branch per lane (3x
// the kernel's time). NaN stays NaN.
template <class F>
SS_ALWAYS_INLINE F exp_nonpositive(F x) {
  const F e = fast_exp::exp_clamped(x);
  if constexpr (sizeof(F) == sizeof(float)) {
    return x < kExpFloor ? 0.0f : e;
  } else {
    using Mask = decltype(x < kExpFloor);
    return __builtin_bit_cast(F, ~(x < kExpFloor) & __builtin_bit_cast(Mask, e));
  }
}

SS_CLONE_IMPL void softmax_impl(float* x, int n) {
  // Eight lanes for the max and the sum keep both reductions vectorisable and
  // their order fixed.
  float m8[8], s8[8] = {};
  for (int j = 0; j < 8; ++j) m8[j] = x[0];
  int i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) m8[j] = x[i + j] > m8[j] ? x[i + j] : m8[j];
  float mx = m8[0];
  for (int j = 1; j < 8; ++j) mx = m8[j] > mx ? m8[j] : mx;
  for (; i < n; ++i) mx = x[i] > mx ? x[i] : mx;
  for (i = 0; i < n; ++i) x[i] = exp_nonpositive(x[i] - mx);
  for (i = 0; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) s8[j] += x[i + j];
  float sum = ((s8[0] + s8[4]) + (s8[1] + s8[5])) + ((s8[2] + s8[6]) + (s8[3] + s8[7]));
  for (; i < n; ++i) sum += x[i];
  const float inv = 1.0f / sum;
  for (int i = 0; i < n; ++i) x[i] *= inv;
}
}  // namespace

SS_CLONED(void, softmax, (float* x, int n), (x, n))

void attn_online_init_sinks(int g, int hd, const float* sink_logits, int n_sinks, float* m, float* l, float* acc) {
  attn_online_init(g, hd, m, l, acc);
  if (n_sinks == 0) return;
  for (int h = 0; h < g; ++h) {
    float mx = -INFINITY;
    for (int s = 0; s < n_sinks; ++s) mx = std::max(mx, sink_logits[s * g + h]);
    float sum = 0;
    for (int s = 0; s < n_sinks; ++s) sum += std::exp(sink_logits[s * g + h] - mx);
    m[h] = mx;
    l[h] = sum;
  }
}

void softmax_with_extra(float* x, int n, const float* extra, int n_extra) {
  float mx = -INFINITY;
  for (int i = 0; i < n; ++i) mx = std::max(mx, x[i]);
  for (int i = 0; i < n_extra; ++i) mx = std::max(mx, extra[i]);
  double sum = 0;
  for (int i = 0; i < n; ++i) sum += (x[i] = std::exp(x[i] - mx));
  for (int i = 0; i < n_extra; ++i) sum += std::exp(extra[i] - mx);
  for (int i = 0; i < n; ++i) x[i] = static_cast<float>(x[i] / sum);
}

void alibi_slopes(int n_heads, float max_bias, float* out) {
  int n2 = 1;
  while (n2 * 2 <= n_heads) n2 *= 2;
  const float m0 = std::pow(2.0f, -max_bias / static_cast<float>(n2));
  const float m1 = std::pow(2.0f, -(max_bias / 2.0f) / static_cast<float>(n2));
  for (int h = 0; h < n_heads; ++h)
    out[h] = h < n2 ? std::pow(m0, static_cast<float>(h + 1)) : std::pow(m1, static_cast<float>(2 * (h - n2) + 1));
}

void attn_online_init(int g, int hd, float* m, float* l, float* acc) {
  for (int h = 0; h < g; ++h) {
    m[h] = -INFINITY;
    l[h] = 0.0f;
  }
  std::fill(acc, acc + static_cast<long>(g) * hd, 0.0f);
}

namespace {
// acc[h*hd + d] += sum_r p[h*ps + r] * v_rows[r*v_stride + d], r < n.
// Heads a multiple of 8 wide: the sums stay in 8-lane registers, split in up
// to four interleaved partial sums so consecutive keys do not wait on each
// other's multiply-add (small heads); other sizes: plain loops.
// W: the clone has 32 registers of 16 floats (AVX-512). Without them, heads
// of 32 and more take the 8-lane path: the 16-lane one's NH x NV sums then
// exceed the register file and GCC moves them through the stack (TinyLlama
// prefill spent 45% of its time here in the AVX2 clone).
template <int HD, class E = F32Elems, bool W = true>
SS_ALWAYS_INLINE void accumulate_chunk(const float* p, int ps, int g, const typename E::T* v_rows, int v_stride, int n,
                                       int hd, float* __restrict__ acc) {
  if constexpr (HD > 0 && HD % kChunk == 0 && (W || HD < 32)) {
    // Heads a multiple of 16 wide: each V row is loaded once for a block of
    // NH heads (16 sums in registers: NH x NV), whose sums are the
    // independent chains.
    constexpr int NV = HD / kChunk, NH = NV >= 16 ? 1 : (16 / NV > 4 ? 4 : 16 / NV);
    // The block's head count is a template argument: with a run-time count
    // GCC kept the NH x NV sums on the stack (a load and a store around
    // every multiply-add).
    auto block = [&]<int BH>(int h0) {
      Lanes part[BH][NV] = {};
      for (int r = 0; r < n; ++r) {
        Lanes v[NV];
        for (int j = 0; j < NV; ++j) v[j] = E::load16(v_rows + static_cast<long>(r) * v_stride + kChunk * j);
        for (int h = 0; h < BH; ++h) {
          const float pr = p[(h0 + h) * ps + r];
          for (int j = 0; j < NV; ++j) part[h][j] += pr * v[j];
        }
      }
      for (int h = 0; h < BH; ++h) {
        float* a = acc + (h0 + h) * HD;
        for (int j = 0; j < NV; ++j) {
          const Lanes sum = part[h][j] + load_lanes(a + kChunk * j);
          std::memcpy(a + kChunk * j, &sum, sizeof sum);
        }
      }
    };
    int h0 = 0;
    for (; h0 + NH <= g; h0 += NH) block.template operator()<NH>(h0);
    for (; h0 < g; ++h0) block.template operator()<1>(h0);
  } else if constexpr (HD == 8 && W) {
    // Two keys' V rows in one 16-lane vector (key r in the low 8 lanes, r + 1
    // in the high), loaded and converted once for up to four heads; each
    // head's two halves are added at the end.
    for (int h0 = 0; h0 < g; h0 += 4) {
      const int nh = g - h0 < 4 ? g - h0 : 4;
      Lanes part[4] = {};
      int r = 0;
      for (; r + 2 <= n; r += 2) {
        const Lanes v =
            E::load8x2(v_rows + static_cast<long>(r) * v_stride, v_rows + static_cast<long>(r + 1) * v_stride);
        for (int h = 0; h < 4; ++h) {
          if (h >= nh) break;
          const float* ph = p + (h0 + h) * ps + r;
          const float a = ph[0], b = ph[1];
          part[h] += Lanes{a, a, a, a, a, a, a, a, b, b, b, b, b, b, b, b} * v;
        }
      }
      for (int h = 0; h < nh; ++h) {
        Eight sum = __builtin_shufflevector(part[h], part[h], 0, 1, 2, 3, 4, 5, 6, 7) +
                    __builtin_shufflevector(part[h], part[h], 8, 9, 10, 11, 12, 13, 14, 15);
        if (r < n) sum += p[(h0 + h) * ps + r] * E::load8(v_rows + static_cast<long>(r) * v_stride);
        float* a = acc + (h0 + h) * HD;
        sum += load8(a);
        std::memcpy(a, &sum, sizeof sum);
      }
    }
  } else if constexpr (HD == 8) {
    // The same sums in the other clones, with the two keys' rows in two
    // 8-lane vectors (even and odd keys): the same additions, so the same
    // bits, without 16-lane vectors built from parts (moved through the stack
    // where registers are 8 lanes wide).
    for (int h0 = 0; h0 < g; h0 += 4) {
      const int nh = g - h0 < 4 ? g - h0 : 4;
      Eight part[4][2] = {};
      int r = 0;
      for (; r + 2 <= n; r += 2) {
        const Eight v0 = E::load8(v_rows + static_cast<long>(r) * v_stride);
        const Eight v1 = E::load8(v_rows + static_cast<long>(r + 1) * v_stride);
        for (int h = 0; h < 4; ++h) {
          if (h >= nh) break;
          const float* ph = p + (h0 + h) * ps + r;
          part[h][0] += ph[0] * v0;
          part[h][1] += ph[1] * v1;
        }
      }
      for (int h = 0; h < nh; ++h) {
        Eight sum = part[h][0] + part[h][1];
        if (r < n) sum += p[(h0 + h) * ps + r] * E::load8(v_rows + static_cast<long>(r) * v_stride);
        float* a = acc + (h0 + h) * HD;
        sum += load8(a);
        std::memcpy(a, &sum, sizeof sum);
      }
    }
  } else if constexpr (HD > 0 && HD % 8 == 0) {
    constexpr int NV = HD / 8, C = NV >= 4 ? 1 : 4 / NV;
    for (int h = 0; h < g; ++h) {
      const float* ph = p + h * ps;
      Eight part[C][NV] = {};
      int r = 0;
      for (; r + C <= n; r += C)
        for (int c = 0; c < C; ++c)
          for (int j = 0; j < NV; ++j)
            part[c][j] += ph[r + c] * E::load8(v_rows + static_cast<long>(r + c) * v_stride + 8 * j);
      for (; r < n; ++r)
        for (int j = 0; j < NV; ++j) part[0][j] += ph[r] * E::load8(v_rows + static_cast<long>(r) * v_stride + 8 * j);
      float* a = acc + h * HD;
      for (int j = 0; j < NV; ++j) {
        Eight sum = part[0][j];
        for (int c = 1; c < C; ++c) sum += part[c][j];
        sum += load8(a + 8 * j);
        std::memcpy(a + 8 * j, &sum, sizeof sum);
      }
    }
  } else {
    // Any other head size (48, 80, 96, 256...: stories15M, Phi, Gemma): the
    // head in columns of 16 lanes (8 outside the AVX-512 clone), up to four
    // columns' sums in registers over the chunk's keys, then the last few
    // dimensions one by one. Each element still takes the keys in order,
    // one multiply-add each, as an element-by-element loop would (it had
    // converted every half float alone: 85% of stories15M's prefill).
    using V = std::conditional_t<W, Lanes, Eight>;
    constexpr int L = W ? kChunk : 8;
    auto load = [](const typename E::T* at) {
      if constexpr (W)
        return E::load16(at);
      else
        return E::load8(at);
    };
    for (int h = 0; h < g; ++h) {
      const float* ph = p + h * ps;
      float* __restrict__ a = acc + h * hd;
      auto columns = [&]<int NV>(int d0) {
        V sum[NV];
        for (int j = 0; j < NV; ++j) std::memcpy(&sum[j], a + d0 + L * j, sizeof(V));
        for (int r = 0; r < n; ++r) {
          const typename E::T* v = v_rows + static_cast<long>(r) * v_stride + d0;
          for (int j = 0; j < NV; ++j) sum[j] += ph[r] * load(v + L * j);
        }
        for (int j = 0; j < NV; ++j) std::memcpy(a + d0 + L * j, &sum[j], sizeof(V));
      };
      int d0 = 0;
      for (; d0 + 4 * L <= hd; d0 += 4 * L) columns.template operator()<4>(d0);
      switch ((hd - d0) / L) {
        case 3:
          columns.template operator()<3>(d0);
          break;
        case 2:
          columns.template operator()<2>(d0);
          break;
        case 1:
          columns.template operator()<1>(d0);
          break;
        default:
          break;
      }
      for (d0 += (hd - d0) / L * L; d0 < hd; ++d0)
        for (int r = 0; r < n; ++r) a[d0] += ph[r] * E::one(v_rows + static_cast<long>(r) * v_stride + d0);
    }
  }
}

// chunk_scores for NR query rows at once (q [NR][hd]): each K row is loaded
// once for all of them, and each row's four chains take the same terms in
// the same order as chunk_scores' for that row alone, so a row's scores do
// not depend on the rows beside it (query tiles: AttnRows).
template <int HD, int NR, class E>
SS_ALWAYS_INLINE void chunk_scores_rows(const float* q, const typename E::T* k_cols, int col_stride, int hd_runtime,
                                        float scale, Lanes* out) {
  const int hd = HD > 0 ? HD : hd_runtime;
  Lanes a[NR][4] = {};
  int d = 0;
  for (; d + 4 <= hd; d += 4)
    for (int j = 0; j < 4; ++j) {
      const Lanes k = E::load16(k_cols + static_cast<long>(d + j) * col_stride);
      for (int r = 0; r < NR; ++r) a[r][j] += q[r * hd + d + j] * k;
    }
  for (; d < hd; ++d) {
    const Lanes k = E::load16(k_cols + static_cast<long>(d) * col_stride);
    for (int r = 0; r < NR; ++r) a[r][0] += q[r * hd + d] * k;
  }
  for (int r = 0; r < NR; ++r) out[r] = ((a[r][0] + a[r][1]) + (a[r][2] + a[r][3])) * scale;
}

// Lanes [lo, hi) of a chunk: one unsigned compare of lane - lo against the
// count. (A macro: GCC 12 fails on a function returning the compare.)
typedef uint32_t LaneIndex __attribute__((vector_size(sizeof(Lanes))));
#define SS_LANES_BETWEEN(lo, hi)                                                                   \
  ((LaneIndex{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15} - static_cast<uint32_t>(lo)) < \
   static_cast<uint32_t>((hi) - (lo)))

// Scores of head h over one chunk of dimension-major K columns. Groups of
// four or more heads score four at a time (block keeps the other three
// until their turn); smaller groups of heads up to 16 wide together too,
// those of wider heads one by one with four chains each.
template <int HD, class E>
SS_ALWAYS_INLINE Lanes head_chunk_scores(const float* q, int g, int h, const typename E::T* kc, int kc_stride, int hd,
                                         float scale, Lanes* block) {
  // Small heads (8, 16): loading and converting the K rows costs more than
  // the multiply-adds, so even two or three heads share each row.
  constexpr bool kSmall = HD > 0 && HD <= 16;
  if (g == 1 || (g < 4 && !kSmall)) return chunk_scores<HD, E>(q + h * hd, kc, kc_stride, hd, scale);
  if (h % 4 == 0) {
    const int nh = g - h < 4 ? g - h : 4;
    if (nh == 4)
      chunk_scores_heads<HD, 4, E>(q + h * hd, kc, kc_stride, hd, scale, block);
    else if (nh == 3)
      chunk_scores_heads<HD, 3, E>(q + h * hd, kc, kc_stride, hd, scale, block);
    else if (nh == 2)
      chunk_scores_heads<HD, 2, E>(q + h * hd, kc, kc_stride, hd, scale, block);
    else
      chunk_scores_heads<HD, 1, E>(q + h * hd, kc, kc_stride, hd, scale, block);
  }
  return block[h % 4];
}

// Scores of query row h of a tile (AttnRows) over one chunk, as
// head_chunk_scores gives a lone query's (g == 1): four rows at a time
// share each K row's load (block keeps the others until their turn).
template <int HD, class E>
SS_ALWAYS_INLINE Lanes row_chunk_scores(const float* q, int g, int h, const typename E::T* kc, int kc_stride, int hd,
                                        float scale, Lanes* block) {
  if (h % 4 == 0) {
    const int nr = g - h < 4 ? g - h : 4;
    if (nr == 4)
      chunk_scores_rows<HD, 4, E>(q + h * hd, kc, kc_stride, hd, scale, block);
    else if (nr == 3)
      chunk_scores_rows<HD, 3, E>(q + h * hd, kc, kc_stride, hd, scale, block);
    else if (nr == 2)
      chunk_scores_rows<HD, 2, E>(q + h * hd, kc, kc_stride, hd, scale, block);
    else
      block[0] = chunk_scores<HD, E>(q + h * hd, kc, kc_stride, hd, scale);
  }
  return block[h % 4];
}

// Score shaping (soft-capping, ALiBi from the run's col0) and masking of
// lanes outside [lo, hi) to -inf, for one chunk of head h.
SS_ALWAYS_INLINE Lanes shape_scores(Lanes sc, int lo, int hi, int h, int r0, float col0, const AttnScoring* scoring) {
  if (scoring) {
    if (const float cap = scoring->softcap; cap > 0)
      for (int r = 0; r < kChunk; ++r) sc[r] = cap * std::tanh(sc[r] / cap);
    if (scoring->slopes) {
      const Lanes lane_f = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
      sc += scoring->slopes[h] * (lane_f + (col0 + static_cast<float>(r0)));
    }
  }
  return SS_LANES_BETWEEN(lo, hi) ? sc : Lanes{} - INFINITY;
}

// head_chunk_scores over two 8-lane halves (chunk_scores_heads8): out[0]
// keys 0-7, out[1] keys 8-15.
template <int HD, class E>
SS_ALWAYS_INLINE void head_chunk_scores8(const float* q, int g, int h, const typename E::T* kc, int kc_stride, int hd,
                                         float scale, Eight (*block)[2], Eight* out) {
  constexpr bool kSmall = HD > 0 && HD <= 16;
  if (g == 1 || (g < 4 && !kSmall)) {
    Eight one[1][2];
    chunk_scores_heads8<HD, 1, E>(q + h * hd, kc, kc_stride, hd, scale, one);
    out[0] = one[0][0];
    out[1] = one[0][1];
    return;
  }
  if (h % 4 == 0) {
    const int nh = g - h < 4 ? g - h : 4;
    if (nh == 4)
      chunk_scores_heads8<HD, 4, E>(q + h * hd, kc, kc_stride, hd, scale, block);
    else if (nh == 3)
      chunk_scores_heads8<HD, 3, E>(q + h * hd, kc, kc_stride, hd, scale, block);
    else if (nh == 2)
      chunk_scores_heads8<HD, 2, E>(q + h * hd, kc, kc_stride, hd, scale, block);
    else
      chunk_scores_heads8<HD, 1, E>(q + h * hd, kc, kc_stride, hd, scale, block);
  }
  out[0] = block[h % 4][0];
  out[1] = block[h % 4][1];
}

// row_chunk_scores over two 8-lane halves: rows in pairs, whose two chains
// per half are those of a lone query's (chunk_scores_heads8 with NH <= 2).
template <int HD, class E>
SS_ALWAYS_INLINE void row_chunk_scores8(const float* q, int g, int h, const typename E::T* kc, int kc_stride, int hd,
                                        float scale, Eight (*block)[2], Eight* out) {
  if (h % 2 == 0) {
    if (g - h >= 2)
      chunk_scores_heads8<HD, 2, E>(q + h * hd, kc, kc_stride, hd, scale, block);
    else
      chunk_scores_heads8<HD, 1, E>(q + h * hd, kc, kc_stride, hd, scale, block);
  }
  out[0] = block[h % 2][0];
  out[1] = block[h % 2][1];
}

// shape_scores for the half of a chunk whose first key is r0 (lanes outside
// [lo, hi), counted from that key, masked).
typedef uint32_t EightIndex __attribute__((vector_size(sizeof(Eight))));
SS_ALWAYS_INLINE Eight shape_scores8(Eight sc, int lo, int hi, int h, int r0, float col0, const AttnScoring* scoring) {
  if (scoring) {
    if (const float cap = scoring->softcap; cap > 0)
      for (int r = 0; r < 8; ++r) sc[r] = cap * std::tanh(sc[r] / cap);
    if (scoring->slopes) {
      const Eight lane_f = {0, 1, 2, 3, 4, 5, 6, 7};
      sc += scoring->slopes[h] * (lane_f + (col0 + static_cast<float>(r0)));
    }
  }
  const EightIndex inside =
      (EightIndex{0, 1, 2, 3, 4, 5, 6, 7} - static_cast<uint32_t>(lo)) < static_cast<uint32_t>(hi - lo);
  return inside ? sc : Eight{} - INFINITY;
}

// Q8_0 / Q4_0 caches keep K token-major in ggml blocks of 32, like V: each
// chunk's keys are decoded into floats and laid out dimension-major, each
// chunk's values into float rows, and span_update runs the float kernels on
// those (E = QuantElems<QT>). kAvx2: read by the AVX2 clone (whole blocks
// decoded by decode_block_asm<8>).
template <GgmlType QT, bool kAvx2Clone = false>
struct QuantElems {
  using T = uint8_t;
  static constexpr GgmlType kType = QT;
  static constexpr bool kAvx2 = kAvx2Clone;
  static constexpr int kBytes = QT == GgmlType::Q8_0 ? 2 + kQ8_0Block : kQ4_0Bytes;  // per block of 32
};
template <class E>
constexpr bool kQuantElems = requires {
  E::kType;
};

// The vector types of an N-element piece of a Q8_0 / Q4_0 block (GCC drops
// vector_size on a type that depends on a template argument).
template <int N>
struct PieceTypes;
template <>
struct PieceTypes<16> {
  typedef float F __attribute__((vector_size(64)));
  typedef int8_t I8 __attribute__((vector_size(16)));
  typedef uint8_t U8 __attribute__((vector_size(16)));
  typedef int16_t I16 __attribute__((vector_size(32)));
  typedef int32_t I32 __attribute__((vector_size(64)));
};
template <>
struct PieceTypes<8> {
  typedef float F __attribute__((vector_size(32)));
  typedef int8_t I8 __attribute__((vector_size(8)));
  typedef uint8_t U8 __attribute__((vector_size(8)));
  typedef int16_t I16 __attribute__((vector_size(16)));
  typedef int32_t I32 __attribute__((vector_size(32)));
};

// Elements [j, j + N) of a Q8_0 / Q4_0 block (values qs, scale d) into out,
// N = 16 (j a multiple of 16) or 8 (of 8). Bytes widen through 16 bits: GCC
// 12 turns a direct 8-to-32-bit vector conversion into a byte-by-byte scalar
// sequence.
template <int N, GgmlType QT>
SS_ALWAYS_INLINE void decode_piece(const uint8_t* qs, int j, float d, float* __restrict__ out) {
  using F = typename PieceTypes<N>::F;
  using I8 = typename PieceTypes<N>::I8;
  using U8 = typename PieceTypes<N>::U8;
  using I16 = typename PieceTypes<N>::I16;
  using I32 = typename PieceTypes<N>::I32;
  I32 w;
  if constexpr (QT == GgmlType::Q8_0) {
    I8 q;
    std::memcpy(&q, qs + j, sizeof q);
    w = __builtin_convertvector(__builtin_convertvector(q, I16), I32);
  } else {
    U8 b;  // element j < 16: low nibble of byte j; j >= 16: high nibble of byte j - 16
    std::memcpy(&b, qs + j % 16, sizeof b);
    w = __builtin_convertvector(__builtin_convertvector(j < 16 ? b & 15 : b >> 4, I16), I32) - 8;
  }
  const F v = __builtin_convertvector(w, F) * d;
  std::memcpy(out, &v, sizeof v);
}

#ifdef SS_F16C_ASM
// Whole Q8_0 / Q4_0 blocks in the AVX-512 and AVX2 clones: the scale by
// vcvtph2ps and the elements by vpmovsxbd / vpmovzxbd, through inline
// assembly (as F16cElems: GCC turns the vector conversions of decode_piece
// into a dozen shuffles each, and the scale's bit conversion into fifteen
// scalar operations). The same values.
SS_ALWAYS_INLINE float block_scale_f16c(const uint8_t* blk) {
  typedef uint16_t H4 __attribute__((vector_size(8), aligned(1)));  // the scale and the next 6 bytes
  typedef float F4 __attribute__((vector_size(16)));
  F4 d4;
  asm("vcvtph2ps %1, %0" : "=x"(d4) : "m"(*reinterpret_cast<const H4*>(blk)));
  return d4[0];
}
// One block into out [32], N elements a conversion: N = 16 in the AVX-512
// clone (zmm from 16 bytes), 8 in the AVX2 clone (ymm from 8 bytes).
template <int N, GgmlType QT>
SS_ALWAYS_INLINE void decode_block_asm(const uint8_t* blk, float* __restrict__ out) {
  using F = typename PieceTypes<N>::F;
  using I32 = typename PieceTypes<N>::I32;
  using Bytes = typename PieceTypes<N>::U8;  // the memory operand: N bytes, read by the instruction
  constexpr int kPieces = 32 / N;
  const float d = block_scale_f16c(blk);
  I32 w[kPieces];
  if constexpr (QT == GgmlType::Q8_0) {
    for (int i = 0; i < kPieces; ++i)
      asm("vpmovsxbd %1, %0" : "=v"(w[i]) : "m"(*reinterpret_cast<const Bytes*>(blk + 2 + N * i)));
  } else {
    for (int i = 0; i < kPieces / 2; ++i) {
      I32 b;  // byte j: element j (low nibble) and element j + 16 (high nibble)
      asm("vpmovzxbd %1, %0" : "=v"(b) : "m"(*reinterpret_cast<const Bytes*>(blk + 2 + N * i)));
      w[i] = (b & 15) - 8;
      w[kPieces / 2 + i] = (b >> 4) - 8;
    }
  }
  for (int i = 0; i < kPieces; ++i) {
    const F v = __builtin_convertvector(w[i], F) * d;
    std::memcpy(out + N * i, &v, sizeof v);
  }
}
#endif

// Elements [e0, e0 + n) of a row of Q8_0 / Q4_0 blocks into out, exactly as
// dequantize_row computes them: block by block (one scale conversion each),
// 16 at a time where 16 of them start a half block, 8 at a time where 8 start
// a quarter (heads of 8), one by one elsewhere. Whole blocks through
// decode_block_asm (kAsm 2: the AVX-512 clone, 16 elements a conversion;
// kAsm 1: the AVX2 clone, 8) where the elements are whole blocks.
template <GgmlType QT, int kAsm = 0>
SS_ALWAYS_INLINE void decode_quant(const uint8_t* row, int e0, int n, float* __restrict__ out) {
  constexpr int kBytes = QuantElems<QT>::kBytes;
  if (e0 % 32 == 0 && n % 32 == 0) {
    // Whole blocks (heads of 32, 64, 128 at a head's start): no partial
    // block to trim.
    for (const uint8_t *blk = row + static_cast<long>(e0 / 32) * kBytes,
                       *end = blk + static_cast<long>(n / 32) * kBytes;
         blk < end; blk += kBytes, out += 32) {
#ifdef SS_F16C_ASM
      if constexpr (kAsm > 0) {
        decode_block_asm<kAsm == 2 ? 16 : 8, QT>(blk, out);
        continue;
      }
#endif
      uint16_t dh;
      std::memcpy(&dh, blk, 2);
      const float d = half_bits_to_float<float>(static_cast<uint32_t>(dh));
      decode_piece<16, QT>(blk + 2, 0, d, out);
      decode_piece<16, QT>(blk + 2, 16, d, out + 16);
    }
    return;
  }
  for (int i = 0; i < n;) {
    const int e = e0 + i, j0 = e % 32, j1 = std::min(32, j0 + (n - i));
    const uint8_t* blk = row + static_cast<long>(e / 32) * kBytes;
    uint16_t dh;
    std::memcpy(&dh, blk, 2);
    const float d = half_bits_to_float<float>(static_cast<uint32_t>(dh));  // exact, branch-free
    const uint8_t* qs = blk + 2;
    float* o = out + i;  // o[j - j0]: element j of this block
    for (int j = j0; j < j1;) {
      if (j % 16 == 0 && j1 - j >= 16) {
        decode_piece<16, QT>(qs, j, d, o + (j - j0));
        j += 16;
      } else if (j % 8 == 0 && j1 - j >= 8) {
        decode_piece<8, QT>(qs, j, d, o + (j - j0));
        j += 8;
      } else {
        if constexpr (QT == GgmlType::Q8_0)
          o[j - j0] = d * static_cast<float>(static_cast<int8_t>(qs[j]));
        else
          o[j - j0] = d * static_cast<float>((j < 16 ? qs[j] & 15 : qs[j - 16] >> 4) - 8);
        ++j;
      }
    }
    i += j1 - j0;
  }
}

// One step of a 16 x 16 transpose in 16 vectors: rows i and i + W (bit W of
// i clear) swap their off-diagonal W-wide blocks; steps W = 8, 4, 2, 1
// transpose the whole (64 two-vector shuffles). V: Lanes or Eight (J: its
// lanes).
template <int W, class V, size_t... J>
SS_ALWAYS_INLINE V swap_lo(V a, V b, std::index_sequence<J...>) {
  return __builtin_shufflevector(a, b, ((J & W) ? sizeof...(J) + J - W : J)...);
}
template <int W, class V, size_t... J>
SS_ALWAYS_INLINE V swap_hi(V a, V b, std::index_sequence<J...>) {
  return __builtin_shufflevector(a, b, ((J & W) ? sizeof...(J) + J : J + W)...);
}
template <int W>
SS_ALWAYS_INLINE void transpose_step(Lanes* m) {
  for (int i = 0; i < kChunk; ++i)
    if (!(i & W)) {
      const Lanes a = m[i], b = m[i + W];
      m[i] = swap_lo<W>(a, b, std::make_index_sequence<kChunk>{});
      m[i + W] = swap_hi<W>(a, b, std::make_index_sequence<kChunk>{});
    }
}

// decode_quant's kAsm for a span_update over element type E in the clone
// W (AVX-512) or not: 0 for float types, the baseline clone, and compilers
// without SS_F16C_ASM.
template <class E, bool W>
constexpr int decode_asm() {
#ifdef SS_F16C_ASM
  if constexpr (kQuantElems<E>) return W ? 2 : E::kAvx2 ? 1 : 0;
#endif
  return 0;
}

// Sums across lanes of N vectors of N lanes at once (V: Lanes, N 16, or
// Eight, N 8): lane r of the result m[0] is the sum of m[r]'s lanes. Each
// step W adds the W-wide halves of m[i] and m[i + W] (for 16: 45 shuffles
// and adds, against 16 separate reductions' 128).
template <int W, class V>
SS_ALWAYS_INLINE void fold_step(V* m) {
  constexpr size_t N = sizeof(V) / sizeof(float);
  for (int i = 0; i < W; ++i) {
    const V a = m[i], b = m[i + W];
    m[i] = swap_lo<W>(a, b, std::make_index_sequence<N>{}) + swap_hi<W>(a, b, std::make_index_sequence<N>{});
  }
}

// Scores of one query (q [HD]) over a chunk of quantized keys decoded
// token-major into rows [kChunk][HD] (keys outside [lo, hi) zeroed), for
// the AVX-512 (W) and AVX2 clones: one partial vector per key, folded
// across lanes. Per query, HD / 16 multiply-adds a key and the fold,
// against the dimension-major path's 16 x HD transpose per chunk, which
// costs as much as the multiply-adds of 8 queries (AVX-512,
// BM_AttentionRuns Q8_0: hd 128 g 2, Qwen3's 2 query heads per KV head,
// 404 -> 280 us; hd 64 g 8, 298 -> 235 us; the AVX2 clone transposed
// element by element). The same bits for a query alone or in a tile
// (AttnRows: one query per row).
template <int HD>
SS_ALWAYS_INLINE Lanes rows_chunk_scores(const float* q, const float* __restrict__ rows, int lo, int hi, float scale) {
  static_assert(HD % kChunk == 0);
  Lanes qv[HD / kChunk];
  for (int i = 0; i < HD / kChunk; ++i) qv[i] = load_lanes(q + i * kChunk);
  // Heads up to 64: every key's row (the caller zeroes those outside [lo,
  // hi)), unrolled, so m stays in registers (a loop that skips keys keeps
  // it in memory: 1.2-1.5x slower); heads of 128: the loop that skips
  // (unrolled, 24 live vectors, 3-15% slower).
  Lanes m[kChunk];
  auto key = [&](int r) {
    Lanes a = qv[0] * load_lanes(rows + r * HD);
    for (int i = 1; i < HD / kChunk; ++i) a += qv[i] * load_lanes(rows + r * HD + i * kChunk);
    m[r] = a;
  };
  if constexpr (HD <= 64) {
#pragma GCC unroll 16
    for (int r = 0; r < kChunk; ++r) key(r);
  } else {
    for (int r = 0; r < kChunk; ++r)
      if (r >= lo && r < hi)
        key(r);
      else
        m[r] = Lanes{};
  }
  fold_step<8>(m);
  fold_step<4>(m);
  fold_step<2>(m);
  fold_step<1>(m);
  return m[0] * scale;
}
// rows_chunk_scores in the AVX2 clone (16 registers of 8 floats): each
// half of the chunk's keys, 8 partials folded to one vector of 8 (out[0]:
// keys 0-7, out[1]: 8-15); every key's row (the caller zeroes those outside
// the run), q read from memory.
template <int HD>
SS_ALWAYS_INLINE void rows_chunk_scores8(const float* q, const float* __restrict__ rows, float scale, Eight* out) {
  static_assert(HD % 8 == 0);
  for (int k = 0; k < 2; ++k) {
    Eight m[8];
#pragma GCC unroll 8
    for (int r = 0; r < 8; ++r) {
      const float* row = rows + (8 * k + r) * HD;
      Eight a = load8(q) * load8(row);
      for (int i = 1; i < HD / 8; ++i) a += load8(q + 8 * i) * load8(row + 8 * i);
      m[r] = a;
    }
    fold_step<4>(m);
    fold_step<2>(m);
    fold_step<1>(m);
    out[k] = m[0] * scale;
  }
}

// Keys [lo, hi) of the chunk from key r0 of a quantized run into pad, [hd][kChunk]
// dimension-major floats (the other lanes 0), through rows [kChunk][hd]. The
// AVX-512 clone (W) transposes 16 x 16 tiles in registers; the others, and
// heads not a multiple of 16 wide, element by element (16-lane shuffles go
// through the stack where registers are 8 lanes wide).
template <int HD, GgmlType QT, bool W>
SS_ALWAYS_INLINE void decode_k_chunk(const KvRun& run, int r0, int lo, int hi, int hd_runtime, float* __restrict__ rows,
                                     float* __restrict__ pad) {
  const int hd = HD > 0 ? HD : hd_runtime;
  const auto* k = static_cast<const uint8_t*>(run.kv.k);
  for (int r = lo; r < hi; ++r)
    decode_quant<QT, W ? 2 : 0>(k + static_cast<size_t>(r0 + r) * run.kv.row_bytes, run.kv.elem0, hd, rows + r * hd);
  if constexpr (W && HD > 0 && HD % kChunk == 0) {
    for (int r = 0; r < kChunk; ++r)
      if (r < lo || r >= hi) std::memset(rows + r * HD, 0, HD * sizeof(float));
    for (int d0 = 0; d0 < HD; d0 += kChunk) {
      Lanes t[kChunk];
      for (int r = 0; r < kChunk; ++r) t[r] = load_lanes(rows + r * HD + d0);
      transpose_step<8>(t);
      transpose_step<4>(t);
      transpose_step<2>(t);
      transpose_step<1>(t);
      for (int d = 0; d < kChunk; ++d) std::memcpy(pad + (d0 + d) * kChunk, &t[d], sizeof t[d]);
    }
  } else {
    for (int d = 0; d < hd; ++d)
      for (int r = 0; r < kChunk; ++r) pad[d * kChunk + r] = r >= lo && r < hi ? rows[r * hd + d] : 0.0f;
  }
}

// One chunk of a span: keys [r0 + lo, r0 + hi) of run `run`.
struct SpanPiece {
  int run, r0, lo, hi;
};

// Step (3) of span_update for heads of 8 in the AVX-512 clone (float-type
// caches): the V sums of a block of up to four heads stay in registers over
// the whole span and are added to acc once (a chunk has 16 keys: summing and
// storing per chunk cost as much as its multiply-adds). Keys go two to a
// vector, interleaved by dimension (lane 2d + k: dimension d of key r + k),
// so the two probabilities of a key pair are one 64-bit broadcast from p;
// two chains per head (four keys a step), so consecutive keys do not wait on
// each other's multiply-add.
template <class E, int BH>
SS_ALWAYS_INLINE void accumulate_span8(const float* p, int h0, const SpanPiece* pieces, int np, const KvRun* runs,
                                       float* __restrict__ acc) {
  using T = typename E::T;
  typedef double Pairs __attribute__((vector_size(sizeof(Lanes))));
  auto interleave = [](Eight a, Eight b) {
    return __builtin_shufflevector(a, b, 0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15);
  };
  auto pair = [](const float* at) {  // {at[0], at[1]} in every 64-bit lane
    double d;
    std::memcpy(&d, at, sizeof d);
    return __builtin_bit_cast(Lanes, Pairs{d, d, d, d, d, d, d, d});
  };
  Lanes part[BH][2] = {};
  for (int c = 0; c < np; ++c) {
    const SpanPiece& pc = pieces[c];
    const KvRun& run = runs[pc.run];
    const long vs = static_cast<long>(run.kv.row_bytes / sizeof(T));
    const T* v = static_cast<const T*>(run.kv.v) + run.kv.elem0 + (pc.r0 + pc.lo) * vs;
    const float* pp = p + c * kChunk + pc.lo;  // pp[h * kAttnSpan + r]: key r of this piece
    const int n = pc.hi - pc.lo;
    int r = 0;
    for (; r + 4 <= n; r += 4) {
      const Lanes v01 = interleave(E::load8(v + r * vs), E::load8(v + (r + 1) * vs));
      const Lanes v23 = interleave(E::load8(v + (r + 2) * vs), E::load8(v + (r + 3) * vs));
      for (int h = 0; h < BH; ++h) {
        const float* ph = pp + (h0 + h) * kAttnSpan + r;
        part[h][0] += pair(ph) * v01;
        part[h][1] += pair(ph + 2) * v23;
      }
    }
    if (r + 2 <= n) {
      const Lanes v01 = interleave(E::load8(v + r * vs), E::load8(v + (r + 1) * vs));
      for (int h = 0; h < BH; ++h) part[h][0] += pair(pp + (h0 + h) * kAttnSpan + r) * v01;
      r += 2;
    }
    if (r < n) {  // a last key alone: its odd lanes 0 (the next key's probability may be any value)
      const Lanes v0 = interleave(E::load8(v + r * vs), Eight{});
      for (int h = 0; h < BH; ++h) part[h][1] += pp[(h0 + h) * kAttnSpan + r] * v0;
    }
  }
  for (int h = 0; h < BH; ++h) {
    const Lanes t = part[h][0] + part[h][1];
    float* a = acc + (h0 + h) * 8;
    const Eight sum = __builtin_shufflevector(t, t, 0, 2, 4, 6, 8, 10, 12, 14) +
                      __builtin_shufflevector(t, t, 1, 3, 5, 7, 9, 11, 13, 15) + load8(a);
    std::memcpy(a, &sum, sizeof sum);
  }
}

// Step (3) of span_update where V is dimension-major like K (KvHeadView::
// v_dim_major: heads of 8 or less), for the BH query heads from h0: one
// vector holds dimension d of a chunk's keys (16 lanes in the AVX-512 clone
// W, two halves of 8 elsewhere), multiplied lane by lane with the keys'
// probabilities (no broadcasts, no shuffles), into one lane-wise sum per
// head and dimension that is added across lanes once per span. Lanes past a
// run's keys have probability 0, and their values are masked to 0 too (a
// reused block's stale value may be inf); blocks narrower than a chunk are
// read through vpad ([hd][kChunk]), so no lane reads past the block.
template <int HD, class E, bool W, int BH>
SS_ALWAYS_INLINE void accumulate_span_dm(const float* p, int h0, int hd_runtime, const SpanPiece* pieces, int np,
                                         const KvRun* runs, float* __restrict__ vpad, float* __restrict__ acc) {
  using T = typename E::T;
  using Vec = std::conditional_t<W, Lanes, Eight>;
  using VecIndex = std::conditional_t<W, LaneIndex, EightIndex>;
  constexpr int kLanes = sizeof(Vec) / sizeof(float), kParts = kChunk / kLanes, kMaxHd = kVDimMajorMaxHeadDim;
  const int hd = HD > 0 ? HD : hd_runtime;
  auto load = [](const T* at) {
    if constexpr (W)
      return E::load16(at);
    else
      return E::load8(at);
  };
  Vec part[BH][kMaxHd] = {};
  for (int c = 0; c < np; ++c) {
    const SpanPiece& pc = pieces[c];
    const KvRun& run = runs[pc.run];
    const int cs = run.kv.col_stride;
    const T* v = static_cast<const T*>(run.kv.v) + static_cast<long>(run.kv.elem0) * cs + pc.r0;
    const bool padded = pc.r0 + kChunk > cs;
    if (padded) {  // as floats: read back through F32 lanes below
      for (int d = 0; d < hd; ++d)
        for (int r = 0; r < kChunk; ++r)
          vpad[d * kChunk + r] = r >= pc.lo && r < pc.hi ? E::one(v + static_cast<long>(d) * cs + r) : 0.0f;
    }
    const bool partial = pc.lo > 0 || pc.hi < kChunk;
    for (int s = 0; s < kParts; ++s) {
      Vec pv[BH];
      for (int h = 0; h < BH; ++h) std::memcpy(&pv[h], p + (h0 + h) * kAttnSpan + c * kChunk + s * kLanes, sizeof(Vec));
      VecIndex lane;
      for (int i = 0; i < kLanes; ++i) lane[i] = static_cast<uint32_t>(s * kLanes + i);
      for (int d = 0; d < hd; ++d) {
        Vec x;
        if (padded)
          std::memcpy(&x, vpad + d * kChunk + s * kLanes, sizeof x);
        else
          x = load(v + static_cast<long>(d) * cs + s * kLanes);
        if (partial) x = (lane - static_cast<uint32_t>(pc.lo)) < static_cast<uint32_t>(pc.hi - pc.lo) ? x : Vec{};
        for (int h = 0; h < BH; ++h) part[h][d] += pv[h] * x;
      }
    }
  }
  for (int h = 0; h < BH; ++h) {
    float* a = acc + (h0 + h) * hd;
    for (int d = 0; d < hd; ++d) {
      if constexpr (W)
        a[d] += lanes_sum(part[h][d]);
      else
        a[d] += halves_sum(part[h][d], Eight{});
    }
  }
}

// span_update for heads of 8 in the AVX-512 clone where V is dimension-major
// like K (KvHeadView::v_dim_major), G query heads per KV head, no score
// shaping, every block at least a chunk wide (col_stride a multiple of 16).
// Per span of up to kAttnSpan keys: (1) each chunk's K rows are loaded once
// for the G heads' scores, kept in p with a running lane-wise max per head;
// (2) the softmax bookkeeping once per head; (3) each chunk's V rows (one
// vector per dimension over its 16 keys) meet the exp'd scores lane by lane
// in one lane-wise sum per head and dimension, added across lanes once per
// span. The general span_update spends more on walking the runs and moving
// scores, broadcasts and shuffles than on arithmetic at this size.
template <class E, int G>
SS_ALWAYS_INLINE void span_update_hd8(const KvRun* runs, int n_runs, float scale, float* m, float* l,
                                      float* __restrict__ acc, float* __restrict__ p) {
  using T = typename E::T;
  constexpr int HD = 8, BH = G < 2 ? G : 2;  // BH: heads whose 8 sums of 16 lanes stay in registers
  struct Chunk {                             // what step (3) needs of a chunk
    const T* v;                              // dimension 0, key of lane 0; dimension d at v + d * cs
    int cs, lo, hi;
  };
  Chunk chunks[kAttnSpan / kChunk];
  int ri = 0, r0 = runs[0].first - runs[0].first % kChunk;
  while (ri < n_runs) {
    // (1) Scores, chunk by chunk.
    Lanes vmax[G];
    for (int h = 0; h < G; ++h) vmax[h] = Lanes{} - INFINITY;
    int nc = 0;
    for (; ri < n_runs && nc < kAttnSpan / kChunk; ++nc) {
      const KvRun& run = runs[ri];
      const int end = run.first + run.count, cs = run.kv.col_stride;
      const long at = static_cast<long>(run.kv.elem0) * cs + r0;
      Chunk& ch = chunks[nc];
      ch = Chunk{static_cast<const T*>(run.kv.v) + at, cs, std::max(run.first, r0) - r0,
                 std::min(end, r0 + kChunk) - r0};
      const T* kc = static_cast<const T*>(run.kv.k) + at;  // laid out as ch.v
      Lanes sc[G][2] = {};
      for (int d = 0; d < HD; ++d) {
        const Lanes k = E::load16(kc + static_cast<long>(d) * cs);
        for (int h = 0; h < G; ++h) sc[h][d & 1] += run.q[h * HD + d] * k;
      }
      const bool partial = ch.lo > 0 || ch.hi < kChunk;
      for (int h = 0; h < G; ++h) {
        Lanes s = (sc[h][0] + sc[h][1]) * scale;
        if (partial) s = SS_LANES_BETWEEN(ch.lo, ch.hi) ? s : Lanes{} - INFINITY;
        vmax[h] = s > vmax[h] ? s : vmax[h];
        std::memcpy(p + h * kAttnSpan + nc * kChunk, &s, sizeof s);
      }
      r0 += kChunk;
      if (r0 >= end && ++ri < n_runs) r0 = runs[ri].first - runs[ri].first % kChunk;
    }
    // (2) The running max, sum and output move once per head and span.
    float mx[G];
    for (int h = 0; h < G; ++h) {
      mx[h] = std::max(lanes_max(vmax[h]), m[h]);
      if (mx[h] != m[h]) {
        const float corr = m[h] == -INFINITY ? 0.0f : exp_nonpositive(m[h] - mx[h]);
        m[h] = mx[h];
        l[h] *= corr;
        for (int d = 0; d < HD; ++d) acc[h * HD + d] *= corr;
      }
    }
    // (3) exp and the V sums, BH heads at a time.
    for (int h0 = 0; h0 < G; h0 += BH) {
      Lanes part[BH][HD] = {}, vsum[BH] = {};
      for (int c = 0; c < nc; ++c) {
        const Chunk& ch = chunks[c];
        Lanes e[BH];
        for (int h = 0; h < BH; ++h) {
          const Lanes x = load_lanes(p + (h0 + h) * kAttnSpan + c * kChunk);
#ifdef SS_EXP_SCALEF
          e[h] = exp_nonpositive_avx512(x - mx[h0 + h]);
#else
          e[h] = exp_nonpositive(x - mx[h0 + h]);  // a masked lane's -inf: 0
#endif
          vsum[h] += e[h];
        }
        const bool partial = ch.lo > 0 || ch.hi < kChunk;
        for (int d = 0; d < HD; ++d) {
          Lanes v = E::load16(ch.v + static_cast<long>(d) * ch.cs);
          if (partial) v = SS_LANES_BETWEEN(ch.lo, ch.hi) ? v : Lanes{};  // a reused block's stale value may be inf
          for (int h = 0; h < BH; ++h) part[h][d] += e[h] * v;
        }
      }
      for (int h = 0; h < BH; ++h) {
        l[h0 + h] += lanes_sum(vsum[h]);
        for (int d = 0; d < HD; ++d) acc[(h0 + h) * HD + d] += lanes_sum(part[h][d]);
      }
    }
  }
}

// Software prefetch for attention over a cache larger than the CPU's caches
// (AttnScoring::stream_kv; a 2048-key window of TinyLlama: 46 MB a token):
// the keys of a paged cache sit in blocks far apart, so the hardware
// prefetchers stop at every block and each block's first lines cost a trip
// to DRAM. A run's K (float types dimension-major: hd rows of its keys;
// quantized ones token-major: the head's blocks of each key) is asked for
// kKAhead runs ahead, and each chunk's V rows while its scores are taken, in
// time for step (3). On a cache that fits, the requests only cost
// instructions (stories15M, 3.5 MB of KV: 0-4% slower decode in alternating
// runs), hence the hint.
template <class T>
SS_ALWAYS_INLINE void prefetch_lines(const T* from, size_t bytes) {
  const auto first = reinterpret_cast<uintptr_t>(from) & ~uintptr_t{63};
  const auto last = (reinterpret_cast<uintptr_t>(from) + bytes - 1) & ~uintptr_t{63};
  for (uintptr_t line = first; line <= last; line += 64) __builtin_prefetch(reinterpret_cast<const void*>(line));
}
template <class T>
SS_ALWAYS_INLINE void prefetch_k_run(const KvRun& run, int hd) {
  const T* k = static_cast<const T*>(run.kv.k) + static_cast<long>(run.kv.elem0) * run.kv.col_stride + run.first;
  const size_t row = static_cast<size_t>(run.kv.col_stride) * sizeof(T);
  if (row <= 64) {  // the head's rows of the block are one stretch of memory
    prefetch_lines(k, (static_cast<size_t>(hd - 1) * run.kv.col_stride + run.count) * sizeof(T));
    return;
  }
  for (int d = 0; d < hd; ++d) prefetch_lines(k + static_cast<long>(d) * run.kv.col_stride, run.count * sizeof(T));
}
// Bytes from a token's row start to the run's head: its first element, or
// the block that holds it (quantized caches).
template <class E>
SS_ALWAYS_INLINE size_t head_offset(const KvRun& run) {
  if constexpr (kQuantElems<E>)
    return static_cast<size_t>(run.kv.elem0 / 32) * E::kBytes;
  else
    return static_cast<size_t>(run.kv.elem0) * sizeof(typename E::T);
}
// Float-type caches with token-major V: the head's V elements of rows
// [from, to).
template <class E>
SS_ALWAYS_INLINE void prefetch_v_rows(const KvRun& run, int from, int to, int hd) {
  const auto* v = static_cast<const uint8_t*>(run.kv.v) + head_offset<E>(run);
  for (int r = from; r < to; ++r)
    prefetch_lines(v + static_cast<size_t>(r) * run.kv.row_bytes, hd * sizeof(typename E::T));
}
// Quantized caches (ggml blocks of 32, token-major K and V): the head's
// blocks of rows [from, to) of plane `plane` (run.kv.k or run.kv.v).
template <class E>
SS_ALWAYS_INLINE void prefetch_quant_rows(const KvRun& run, const void* plane, int from, int to, int hd) {
  const auto* at = static_cast<const uint8_t*>(plane) + head_offset<E>(run);
  const size_t bytes = static_cast<size_t>((run.kv.elem0 + hd - 1) / 32 - run.kv.elem0 / 32 + 1) * E::kBytes;
  for (int r = from; r < to; ++r) prefetch_lines(at + static_cast<size_t>(r) * run.kv.row_bytes, bytes);
}

// Online softmax over a list of runs of dimension-major float-type blocks, a
// span of up to kAttnSpan keys at a time: (1) every chunk's scores for the g
// heads into p [g][kAttnSpan], masked lanes -inf; (2) per head, one max over
// the span (the running max and sum, and the accumulator if the max moved,
// are updated once per span, not per chunk), exp and a lane-wise sum; (3) the
// V rows of each chunk, read once for the group. HD > 0: the head size is a
// compile-time constant, so the per-key loops unroll fully (heads are small:
// 8 to 128); HD == 0: any size. E: the cache's element type, converted to
// float as it is loaded.
// G > 0: the group size is a compile-time constant too (small heads, where
// the per-head branches cost as much as the arithmetic).
template <int HD, class E, int G = 0, bool W = true>
SS_ALWAYS_INLINE void span_update(int g_runtime, const KvRun* runs, int n_runs, int hd_runtime, float scale, float* m,
                                  float* l, float* __restrict__ acc, float* __restrict__ scratch,
                                  const AttnScoring* scoring) {
  using T = typename E::T;
  constexpr bool kQuant = kQuantElems<E>;
  // What shapes the scores: none when the caller passed only the stream_kv
  // hint, so that a hint never moves a run onto another path (other bits).
  const AttnScoring* shaping =
      scoring && (scoring->softcap > 0 || scoring->slopes || scoring->rows) ? scoring : nullptr;
  if constexpr (HD == 8 && W && !kQuant && G > 0) {
    bool fits = runs[0].kv.v_dim_major && !shaping;
    for (int i = 0; i < n_runs && fits; ++i) fits = runs[i].kv.col_stride % kChunk == 0;
    if (fits) return span_update_hd8<E, G>(runs, n_runs, scale, m, l, acc, scratch);
  }
  const int g = G > 0 ? G : g_runtime;
  const int hd = HD > 0 ? HD : hd_runtime;
  float* __restrict__ p = scratch;                    // [g][kAttnSpan]
  float* __restrict__ pad = scratch + g * kAttnSpan;  // [hd][kChunk]
  float* __restrict__ rows = pad + hd * kChunk;       // [kChunk][hd] (quantized types)
  SpanPiece pieces[kAttnSpan / kChunk];
  // Heads wider than 16 (smaller heads share lines among KV heads: in cache
  // after the first).
  constexpr bool kPrefetch = HD == 0 || HD > 16;
  // Quantized caches: whole blocks decoded by the clone's instructions
  // (decode_quant's kAsm), and keys scored token-major (rows_chunk_scores)
  // in the AVX-512 and AVX2 clones.
  constexpr int kDecodeAsm = decode_asm<E, W>();
  constexpr bool kRowScores = kDecodeAsm > 0 && HD > 0 && HD % 32 == 0;
  constexpr int kKAhead = 2;  // runs (blocks) ahead: 1, 2 and 4 measured alike
  const bool stream = hd > 16 && scoring && scoring->stream_kv;
  int prefetched = 0;  // the last run whose K was asked for (run 0: the caller's first touch)
  // A query tile's rows (not for heads of 8: AttnRows) and the ordinal of
  // the next key in the run list.
  const AttnRows* tile = HD != 8 && shaping ? shaping->rows : nullptr;
  int ord = 0;
  int ri = 0, r0 = n_runs > 0 ? runs[0].first - runs[0].first % kChunk : 0;
  while (ri < n_runs) {
    // (1) Scores of up to kAttnSpan / kChunk chunks.
    int np = 0;
    while (ri < n_runs && np < kAttnSpan / kChunk) {
      const KvRun& run = runs[ri];
      const int end = run.first + run.count;
      const int lo = std::max(run.first, r0) - r0, hi = std::min(end, r0 + kChunk) - r0;
      if (kPrefetch && stream) {
        if constexpr (kQuant) {
          for (; prefetched < ri + kKAhead && prefetched + 1 < n_runs; ++prefetched) {
            const KvRun& next = runs[prefetched + 1];
            prefetch_quant_rows<E>(next, next.kv.k, next.first, next.first + next.count, hd);
          }
          prefetch_quant_rows<E>(run, run.kv.v, r0 + lo, r0 + hi, hd);
        } else {
          for (; prefetched < ri + kKAhead && prefetched + 1 < n_runs;) prefetch_k_run<T>(runs[++prefetched], hd);
          if (!runs[0].kv.v_dim_major) prefetch_v_rows<E>(run, r0 + lo, r0 + hi, hd);
        }
      }
      // Lanes [lo_h, hi_h) of the chunk that row h of a tile sees.
      const int ord_r0 = ord - lo;  // the ordinal lane 0 would have
      ord += hi - lo;
      auto row_lanes = [&](int h, int& lo_h, int& hi_h) {
        lo_h = lo;
        hi_h = hi;
        if (tile && ord_r0 + lo >= tile->n_shared) {
          lo_h = std::clamp(tile->lo[h] - ord_r0, lo, hi);
          hi_h = std::clamp(tile->hi[h] - ord_r0, lo_h, hi);
        }
      };
      // Row h's col0 for this run: a tile's rows under ALiBi sit at their
      // own positions (AttnRows::col0_shared / col0_window).
      auto row_col0 = [&](int h) {
        if (!tile || !tile->col0_window) return run.col0;
        return run.col0 + (ord_r0 + lo >= tile->n_shared ? tile->col0_window[h] : tile->col0_shared[h]);
      };
      // K of the float types, read in place (the quantized ones: from pad).
      using KE = std::conditional_t<kQuant, F32Elems, E>;
      const auto* kc = reinterpret_cast<const typename KE::T*>(
          static_cast<const T*>(run.kv.k) + (kQuant ? 0 : static_cast<long>(run.kv.elem0) * run.kv.col_stride + r0));
      // The chunk's lanes run past the columns: the valid ones are copied
      // out (as floats), so no lane reads past them.
      const bool padded = kQuant || r0 + kChunk > run.kv.col_stride;
      if constexpr (kRowScores) {
        const auto* k = static_cast<const uint8_t*>(run.kv.k);
        for (int r = lo; r < hi; ++r)
          decode_quant<E::kType, kDecodeAsm>(k + static_cast<size_t>(r0 + r) * run.kv.row_bytes, run.kv.elem0, HD,
                                             rows + r * HD);
        if (hi - lo < kChunk) {
          std::memset(rows, 0, sizeof(float) * HD * lo);
          std::memset(rows + hi * HD, 0, sizeof(float) * HD * (kChunk - hi));
        }
      } else if constexpr (kQuant)
        decode_k_chunk<HD, E::kType, W>(run, r0, lo, hi, hd, rows, pad);
      else if (padded)
        for (int d = 0; d < hd; ++d)
          for (int r = 0; r < kChunk; ++r)
            pad[d * kChunk + r] = r >= lo && r < hi ? E::one(kc + static_cast<long>(d) * run.kv.col_stride + r) : 0.0f;
      if constexpr (W) {
        Lanes block[4];
        for (int h = 0; h < g; ++h) {
          Lanes sc;
          if constexpr (kRowScores)
            sc = rows_chunk_scores<HD>(run.q + h * HD, rows, lo, hi, scale);
          else if (tile)
            sc = padded ? row_chunk_scores<HD, F32Elems>(run.q, g, h, pad, kChunk, hd, scale, block)
                        : row_chunk_scores<HD, KE>(run.q, g, h, kc, run.kv.col_stride, hd, scale, block);
          else
            sc = padded ? head_chunk_scores<HD, F32Elems>(run.q, g, h, pad, kChunk, hd, scale, block)
                        : head_chunk_scores<HD, KE>(run.q, g, h, kc, run.kv.col_stride, hd, scale, block);
          int lo_h, hi_h;
          row_lanes(h, lo_h, hi_h);
          const Lanes shaped = shape_scores(sc, lo_h, hi_h, h, r0, row_col0(h), shaping);
          std::memcpy(p + h * kAttnSpan + np * kChunk, &shaped, sizeof shaped);
        }
      } else {
        Eight block[4][2], sc[2];
        for (int h = 0; h < g; ++h) {
          if constexpr (kRowScores) {
            rows_chunk_scores8<HD>(run.q + h * HD, rows, scale, sc);
          } else if (tile) {
            if (padded)
              row_chunk_scores8<HD, F32Elems>(run.q, g, h, pad, kChunk, hd, scale, block, sc);
            else
              row_chunk_scores8<HD, KE>(run.q, g, h, kc, run.kv.col_stride, hd, scale, block, sc);
          } else if (padded) {
            head_chunk_scores8<HD, F32Elems>(run.q, g, h, pad, kChunk, hd, scale, block, sc);
          } else {
            head_chunk_scores8<HD, KE>(run.q, g, h, kc, run.kv.col_stride, hd, scale, block, sc);
          }
          int lo_h, hi_h;
          row_lanes(h, lo_h, hi_h);
          for (int half = 0; half < 2; ++half) {
            const Eight shaped =
                shape_scores8(sc[half], lo_h - 8 * half, hi_h - 8 * half, h, r0 + 8 * half, row_col0(h), shaping);
            std::memcpy(p + h * kAttnSpan + np * kChunk + 8 * half, &shaped, sizeof shaped);
          }
        }
      }
      pieces[np++] = SpanPiece{ri, r0, lo, hi};
      r0 += kChunk;
      if (r0 >= end && ++ri < n_runs) r0 = runs[ri].first - runs[ri].first % kChunk;
    }
    // (2) Softmax bookkeeping once per head and span.
    for (int h = 0; h < g; ++h) {
      float* ph = p + h * kAttnSpan;
      float span_max;
      if constexpr (W) {
        Lanes vmax = load_lanes(ph);
        for (int c = 1; c < np; ++c) {
          const Lanes x = load_lanes(ph + c * kChunk);
          vmax = x > vmax ? x : vmax;
        }
        span_max = lanes_max(vmax);
      } else {
        Eight lo = load8(ph), hi = load8(ph + 8);
        for (int c = 1; c < np; ++c) {
          const Eight x = load8(ph + c * kChunk), y = load8(ph + c * kChunk + 8);
          lo = x > lo ? x : lo;
          hi = y > hi ? y : hi;
        }
        span_max = halves_max(lo, hi);
      }
      const float mx = std::max(span_max, m[h]);
      if (mx != m[h]) {
        const float corr = m[h] == -INFINITY ? 0.0f : exp_nonpositive(m[h] - mx);
        m[h] = mx;
        l[h] *= corr;
        float* __restrict__ a = acc + h * hd;
        for (int d = 0; d < hd; ++d) a[d] *= corr;
      }
      if constexpr (W) {
        Lanes vsum = {};
        for (int c = 0; c < np; ++c) {
          const Lanes x = load_lanes(ph + c * kChunk);
          const Lanes e = exp_nonpositive(x - mx);  // a masked lane's -inf: 0
          vsum += e;
          std::memcpy(ph + c * kChunk, &e, sizeof e);
        }
        l[h] += lanes_sum(vsum);
      } else {
        Eight vsum[2] = {};
        for (int c = 0; c < np; ++c)
          for (int half = 0; half < 2; ++half) {
            float* at = ph + c * kChunk + 8 * half;
            const Eight x = load8(at);
            const Eight e = exp_nonpositive(x - mx);
            vsum[half] += e;
            std::memcpy(at, &e, sizeof e);
          }
        l[h] += halves_sum(vsum[0], vsum[1]);
      }
    }
    // (3) The chunks' V rows.
    if constexpr (!kQuant && (HD == 0 || HD == 8)) {
      if (runs[0].kv.v_dim_major) {
        constexpr int BH = W ? 2 : 1;  // W: 16 sums of 16 lanes in registers
        int h0 = 0;
        for (; h0 + BH <= g; h0 += BH) accumulate_span_dm<HD, E, W, BH>(p, h0, hd, pieces, np, runs, pad, acc);
        for (; h0 < g; ++h0) accumulate_span_dm<HD, E, W, 1>(p, h0, hd, pieces, np, runs, pad, acc);
        continue;
      }
    }
    if constexpr (HD == 8 && W && !kQuant) {
      for (int h0 = 0; h0 < g; h0 += 4) {
        const int nh = g - h0 < 4 ? g - h0 : 4;
        if (nh == 4)
          accumulate_span8<E, 4>(p, h0, pieces, np, runs, acc);
        else if (nh == 3)
          accumulate_span8<E, 3>(p, h0, pieces, np, runs, acc);
        else if (nh == 2)
          accumulate_span8<E, 2>(p, h0, pieces, np, runs, acc);
        else
          accumulate_span8<E, 1>(p, h0, pieces, np, runs, acc);
      }
      continue;
    }
    for (int c = 0; c < np; ++c) {
      if (kQuant && hd > 16 && !stream && c + 1 < np) {
        // Quantized types without stream_kv: the next chunk's V rows are
        // asked for while this chunk's are summed (under stream_kv: in step
        // (1), further ahead).
        // Heads of 16 or less: not, since a line holds several KV heads'
        // rows of a token, in cache for every KV head after the first (at
        // hd 8 the prefetch loop took 14% of the kernel's time).
        const SpanPiece& pn = pieces[c + 1];
        const KvRun& nrun = runs[pn.run];
        const auto* nv = static_cast<const uint8_t*>(nrun.kv.v) + head_offset<E>(nrun);
        for (int r = pn.r0 + pn.lo; r < pn.r0 + pn.hi; ++r)
          __builtin_prefetch(nv + static_cast<size_t>(r) * nrun.kv.row_bytes);
      }
      const SpanPiece& pc = pieces[c];
      const KvRun& run = runs[pc.run];
      if constexpr (kQuant) {
        const auto* v = static_cast<const uint8_t*>(run.kv.v);
        for (int r = pc.lo; r < pc.hi; ++r)
          decode_quant<E::kType, kDecodeAsm>(v + static_cast<size_t>(pc.r0 + r) * run.kv.row_bytes, run.kv.elem0, hd,
                                             rows + (r - pc.lo) * hd);
        accumulate_chunk<HD, F32Elems, W>(p + c * kChunk + pc.lo, kAttnSpan, g, rows, hd, pc.hi - pc.lo, hd, acc);
      } else {
        const int vs = static_cast<int>(run.kv.row_bytes / sizeof(T));
        const T* v = static_cast<const T*>(run.kv.v) + run.kv.elem0 + static_cast<long>(pc.r0 + pc.lo) * vs;
        accumulate_chunk<HD, E, W>(p + c * kChunk + pc.lo, kAttnSpan, g, v, vs, pc.hi - pc.lo, hd, acc);
      }
    }
  }
}

// One cloned function per (cache type, head size[, group size]): each clone
// holds one specialisation. One clone holding all 39 (a switch over type and
// size, everything inlined) took the compiler 100 s at -O3 and 280-350 s under
// ASan, superlinear in the function's size.
using RunsFn = void (*)(int g, const KvRun* runs, int n_runs, int hd, float scale, float* m, float* l, float* acc,
                        float* scratch, const AttnScoring* sc);
#define SS_RUNS_PARAMS                                                                                        \
  (int g, const KvRun* runs, int n_runs, int hd, float scale, float* m, float* l, float* acc, float* scratch, \
   const AttnScoring* sc)
#define SS_RUNS_ARGS (g, runs, n_runs, hd, scale, m, l, acc, scratch, sc)
// NAME_impl<L>: the kernel __VA_ARGS__ (a span_update instance) called with
// the runs' arguments.
#define SS_RUNS_IMPL(NAME, ...)                   \
  template <CloneLevel L>                         \
  SS_CLONE_IMPL void NAME##_impl SS_RUNS_PARAMS { \
    __VA_ARGS__ SS_RUNS_ARGS;                     \
  }
#define SS_DEFINE_RUNS(NAME, ...) \
  SS_RUNS_IMPL(NAME, __VA_ARGS__) \
  SS_CLONED_BY_LEVEL(void, NAME, SS_RUNS_PARAMS, SS_RUNS_ARGS)
#if defined(__x86_64__) && defined(__GNUC__)
// A size-specialised kernel whose baseline clone (x86-64 without AVX2: old
// or low-end CPUs, where speed is not the aim) is ANY's, the any-size one:
// 34 fewer unrolled clones, half of this file's compile time (80.8 -> 40.6 s
// at -O3).
#define SS_DEFINE_SIZED_RUNS(NAME, ANY, ...)                                                 \
  SS_RUNS_IMPL(NAME, __VA_ARGS__)                                                            \
  SS_CLONES(void, NAME, SS_RUNS_PARAMS, SS_RUNS_ARGS, NAME##_impl<::ss::CloneLevel::Avx512>, \
            NAME##_impl<::ss::CloneLevel::Avx2>, ANY##_base)
#else
#define SS_DEFINE_SIZED_RUNS(NAME, ANY, ...) SS_DEFINE_RUNS(NAME, __VA_ARGS__)
#endif

// runs_<TAG>_<head size> for head size hd: the sizes with their own clones, else 0.
#define SS_BY_HEAD_SIZE(TAG)      \
  (hd == 8     ? runs_##TAG##_8   \
   : hd == 16  ? runs_##TAG##_16  \
   : hd == 32  ? runs_##TAG##_32  \
   : hd == 64  ? runs_##TAG##_64  \
   : hd == 128 ? runs_##TAG##_128 \
               : runs_##TAG##_0)
// The clone with 32 registers of 16 floats (span_update's W).
constexpr CloneLevel kWide = CloneLevel::Avx512;
// The compile-time head sizes the kernels unroll for (0: any other size), and
// for head size 8 the group sizes too. Float-type blocks (K dimension-major)
// are read through element loader E.
#define SS_FLOAT_FAMILY(TAG, E)                                                                   \
  SS_DEFINE_RUNS(runs_##TAG##_0, span_update<0, typename ClonedElems<E, L>::type, 0, L == kWide>) \
  SS_DEFINE_SIZED_RUNS(runs_##TAG##_8g1, runs_##TAG##_0,                                          \
                       span_update<8, typename ClonedElems<E, L>::type, 1, L == kWide>)           \
  SS_DEFINE_SIZED_RUNS(runs_##TAG##_8g2, runs_##TAG##_0,                                          \
                       span_update<8, typename ClonedElems<E, L>::type, 2, L == kWide>)           \
  SS_DEFINE_SIZED_RUNS(runs_##TAG##_8g4, runs_##TAG##_0,                                          \
                       span_update<8, typename ClonedElems<E, L>::type, 4, L == kWide>)           \
  SS_DEFINE_SIZED_RUNS(runs_##TAG##_8, runs_##TAG##_0,                                            \
                       span_update<8, typename ClonedElems<E, L>::type, 0, L == kWide>)           \
  SS_DEFINE_SIZED_RUNS(runs_##TAG##_16, runs_##TAG##_0,                                           \
                       span_update<16, typename ClonedElems<E, L>::type, 0, L == kWide>)          \
  SS_DEFINE_SIZED_RUNS(runs_##TAG##_32, runs_##TAG##_0,                                           \
                       span_update<32, typename ClonedElems<E, L>::type, 0, L == kWide>)          \
  SS_DEFINE_SIZED_RUNS(runs_##TAG##_64, runs_##TAG##_0,                                           \
                       span_update<64, typename ClonedElems<E, L>::type, 0, L == kWide>)          \
  SS_DEFINE_SIZED_RUNS(runs_##TAG##_128, runs_##TAG##_0,                                          \
                       span_update<128, typename ClonedElems<E, L>::type, 0, L == kWide>)         \
  RunsFn pick_##TAG(int hd, int g) {                                                              \
    if (hd == 8 && (g == 1 || g == 2 || g == 4))                                                  \
      return g == 1 ? runs_##TAG##_8g1 : g == 2 ? runs_##TAG##_8g2 : runs_##TAG##_8g4;            \
    return SS_BY_HEAD_SIZE(TAG);                                                                  \
  }
#define SS_QUANT_FAMILY(TAG, QT)                                                                       \
  SS_DEFINE_RUNS(runs_##TAG##_0, span_update<0, QuantElems<QT, L == CloneLevel::Avx2>, 0, L == kWide>) \
  SS_DEFINE_SIZED_RUNS(runs_##TAG##_8, runs_##TAG##_0,                                                 \
                       span_update<8, QuantElems<QT, L == CloneLevel::Avx2>, 0, L == kWide>)           \
  SS_DEFINE_SIZED_RUNS(runs_##TAG##_16, runs_##TAG##_0,                                                \
                       span_update<16, QuantElems<QT, L == CloneLevel::Avx2>, 0, L == kWide>)          \
  SS_DEFINE_SIZED_RUNS(runs_##TAG##_32, runs_##TAG##_0,                                                \
                       span_update<32, QuantElems<QT, L == CloneLevel::Avx2>, 0, L == kWide>)          \
  SS_DEFINE_SIZED_RUNS(runs_##TAG##_64, runs_##TAG##_0,                                                \
                       span_update<64, QuantElems<QT, L == CloneLevel::Avx2>, 0, L == kWide>)          \
  SS_DEFINE_SIZED_RUNS(runs_##TAG##_128, runs_##TAG##_0,                                               \
                       span_update<128, QuantElems<QT, L == CloneLevel::Avx2>, 0, L == kWide>)         \
  SS_DEFINE_SIZED_RUNS(runs_##TAG##_256, runs_##TAG##_0,                                               \
                       span_update<256, QuantElems<QT, L == CloneLevel::Avx2>, 0, L == kWide>)         \
  RunsFn pick_##TAG(int hd, int) { return hd == 256 ? runs_##TAG##_256 : SS_BY_HEAD_SIZE(TAG); }
SS_FLOAT_FAMILY(f32, F32Elems)
SS_FLOAT_FAMILY(f16, F16Elems)
SS_FLOAT_FAMILY(bf16, BF16Elems)
SS_QUANT_FAMILY(q8_0, GgmlType::Q8_0)
SS_QUANT_FAMILY(q4_0, GgmlType::Q4_0)
#undef SS_QUANT_FAMILY
#undef SS_BY_HEAD_SIZE
#undef SS_FLOAT_FAMILY
#undef SS_DEFINE_SIZED_RUNS
#undef SS_DEFINE_RUNS
#undef SS_RUNS_IMPL
#undef SS_RUNS_ARGS
#undef SS_RUNS_PARAMS

RunsFn pick_runs(GgmlType type, int hd, int g) {
  switch (type) {
    case GgmlType::F32:
      return pick_f32(hd, g);
    case GgmlType::F16:
      return pick_f16(hd, g);
    case GgmlType::BF16:
      return pick_bf16(hd, g);
    case GgmlType::Q8_0:
      return pick_q8_0(hd, g);
    case GgmlType::Q4_0:
      return pick_q4_0(hd, g);
    default:
      return nullptr;
  }
}
}  // namespace

void attn_online_update_runs(int g, const KvRun* runs, int n_runs, int hd, float scale, float* m, float* l, float* acc,
                             float* scratch, const AttnScoring* scoring) {
  if (n_runs <= 0) return;
  const GgmlType type = runs[0].kv.type;
  SS_CHECK_MSG(kv_k_dim_major(type) || type == GgmlType::Q8_0 || type == GgmlType::Q4_0,
               "attention: unsupported KV cache type");
  const bool v_dim_major = runs[0].kv.v_dim_major;
  SS_CHECK_MSG(!v_dim_major || (kv_k_dim_major(type) && hd <= kVDimMajorMaxHeadDim),
               "attention: dimension-major V is for float-type caches and heads of 8 or less");
  for (int i = 1; i < n_runs; ++i)
    SS_CHECK_MSG(runs[i].kv.type == type && runs[i].kv.v_dim_major == v_dim_major,
                 "attention: runs of mixed KV cache layouts");
  SS_CHECK_MSG(!scoring || !scoring->rows || (hd > 8 && !v_dim_major),
               "attention: query tiles are for heads wider than 8");
  SS_CHECK_MSG(!scoring || !scoring->rows || !scoring->slopes ||
                   (scoring->rows->col0_window && (scoring->rows->n_shared == 0 || scoring->rows->col0_shared)),
               "attention: a query tile under ALiBi needs its rows' col0 offsets");
  pick_runs(type, hd, g)(g, runs, n_runs, hd, scale, m, l, acc, scratch, scoring);
}

void attn_online_update_kv(const float* q, int g, const KvHeadView& kv, int first, int count, int hd, float scale,
                           float* m, float* l, float* acc, float* scratch, const AttnScoring* scoring) {
  const KvRun run{kv, q, first, count, scoring ? scoring->col0 : 0.0f};
  attn_online_update_runs(g, &run, 1, hd, scale, m, l, acc, scratch, scoring);
}

void attn_online_update(const float* q, int g, const float* k_cols, int col_stride, const float* v_rows, int v_stride,
                        int first, int count, int hd, float scale, float* m, float* l, float* acc, float* scratch,
                        const AttnScoring* scoring) {
  const KvHeadView kv{GgmlType::F32, k_cols, v_rows, col_stride, static_cast<size_t>(v_stride) * sizeof(float), 0};
  attn_online_update_kv(q, g, kv, first, count, hd, scale, m, l, acc, scratch, scoring);
}

void kv_decode_head(const KvHeadView& kv, int first, int count, int hd, float* k_out, float* v_out) {
  const auto* k8 = static_cast<const uint8_t*>(kv.k);
  const auto* v8 = static_cast<const uint8_t*>(kv.v);
  std::vector<float> row(static_cast<size_t>(kv.elem0 + hd + 32));
  for (int r = 0; r < count; ++r) {
    const int key = first + r;
    if (kv_k_dim_major(kv.type)) {
      const size_t es = kv.type == GgmlType::F32 ? 4 : 2;
      for (int d = 0; d < hd; ++d)
        dequantize_row(kv.type, k8 + (static_cast<size_t>(kv.elem0 + d) * kv.col_stride + key) * es,
                       k_out + static_cast<size_t>(d) * count + r, 1);
      if (kv.v_dim_major)
        for (int d = 0; d < hd; ++d)
          dequantize_row(kv.type, v8 + (static_cast<size_t>(kv.elem0 + d) * kv.col_stride + key) * es,
                         v_out + static_cast<size_t>(r) * hd + d, 1);
      else
        dequantize_row(kv.type, v8 + static_cast<size_t>(key) * kv.row_bytes + kv.elem0 * es,
                       v_out + static_cast<size_t>(r) * hd, hd);
    } else {
      // Whole blocks up to the head's end, then the head's slice.
      const int n = (kv.elem0 + hd + 31) / 32 * 32;
      dequantize_row(kv.type, k8 + static_cast<size_t>(key) * kv.row_bytes, row.data(), n);
      for (int d = 0; d < hd; ++d) k_out[static_cast<size_t>(d) * count + r] = row[static_cast<size_t>(kv.elem0 + d)];
      dequantize_row(kv.type, v8 + static_cast<size_t>(key) * kv.row_bytes, row.data(), n);
      std::copy(row.begin() + kv.elem0, row.begin() + kv.elem0 + hd, v_out + static_cast<size_t>(r) * hd);
    }
  }
}

void attn_online_finish(int g, int hd, const float* l, const float* acc, float* out) {
  for (int h = 0; h < g; ++h) {
    const float inv = 1.0f / l[h];
    for (int d = 0; d < hd; ++d) out[h * hd + d] = acc[h * hd + d] * inv;
  }
}

void softmax_scalar(float* x, int n) {
  float mx = x[0];
  for (int i = 1; i < n; ++i) mx = std::max(mx, x[i]);
  double sum = 0;
  for (int i = 0; i < n; ++i) sum += (x[i] = std::exp(x[i] - mx));
  for (int i = 0; i < n; ++i) x[i] = static_cast<float>(x[i] / sum);
}

void attn_scores_scalar(const float* q, const float* k_cols, int col_stride, int count, int hd, float scale,
                        float* scores) {
  for (int r = 0; r < count; ++r) {
    float s = 0;
    for (int d = 0; d < hd; ++d) s += q[d] * k_cols[static_cast<long>(d) * col_stride + r];
    scores[r] = s * scale;
  }
}

void attn_accumulate_scalar(const float* probs, const float* v_rows, int stride, int count, int hd, float* acc) {
  for (int r = 0; r < count; ++r)
    for (int d = 0; d < hd; ++d) acc[d] += probs[r] * v_rows[static_cast<long>(r) * stride + d];
}

}  // namespace ss
