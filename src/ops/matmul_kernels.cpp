// SIMD matmul kernels, compiled once per instruction set by Highway
// (foreach_target re-includes this file) and picked at run time: AVX-512,
// AVX2, SSE4 and the portable EMU128 on x86, NEON on Arm.
//
// Weights are decoded block by block into float vectors inside registers and
// multiplied with float activations: no int8 activation quantization, so a
// quantized model computes the same function as its dequantized twin (only the
// summation order differs).
// The kernels hold tiles of accumulators in arrays of vectors, which SVE's
// sizeless vector types do not allow: Arm builds compile NEON only
// (scripts/check_arm_compile.sh cross-compiles this with aarch64 g++). SSSE3
// is left out too: only pre-2008 x86 has it without SSE4, and each target
// costs a fifth of this file's compile time in every build.
#ifndef HWY_DISABLED_TARGETS
#define HWY_DISABLED_TARGETS (HWY_SVE | HWY_SVE2 | HWY_SVE_256 | HWY_SVE2_128 | HWY_SSSE3)
#endif
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/matmul_kernels.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
// Included after foreach_target.
#include <hwy/highway.h>

#include <atomic>
#include <mutex>
#include <vector>

#include "format/tensor.h"
#include "ops/matmul_kernels.h"
#include "util/cpu_features.h"
#include "util/fp16.h"

HWY_BEFORE_NAMESPACE();
namespace ss {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
// Masked loads that never touch the lanes they leave out (AVX-512): kernels
// fold a row's last partial vector into their lane sums (DecodeTail).
#undef SS_MASKED_TAIL
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
#define SS_MASKED_TAIL 1
#else
#define SS_MASKED_TAIL 0
#endif
using VF = hn::Vec<DF>;

inline float load_half(const uint8_t* p) {
  uint16_t h;
  __builtin_memcpy(&h, p, 2);
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2
  return _cvtsh_ss(h);  // F16C: exact, like the scalar conversion
#else
  return fp16_to_fp32(h);
#endif
}

// Calls fn(i, w) where w[q] holds elements [i, i + Lanes) of row q (R rows
// decoded in step, so R independent chains hide latency), in an order fixed
// per type; returns how many leading elements were covered (the rest, fewer
// than Lanes, only for the element-wise types). Each value is computed
// exactly as dequantize_row computes it.
template <int R, class Fn>
HWY_INLINE int64_t DecodeRows(GgmlType t, const uint8_t* const* rows, int64_t n, Fn&& fn) {
  const DF df;
  const hn::RebindToSigned<DF> di;
  const hn::Rebind<uint8_t, DF> du8;
  const hn::Rebind<int8_t, DF> di8;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  const auto k15 = hn::Set(di, 15);
  VF w[R];
  int64_t i = 0;
  // R interleaved rows confuse the hardware prefetcher: while these rows
  // decode, fetch the same place of the next R rows (they follow in memory).
  const size_t ahead = static_cast<size_t>(R) * row_bytes(t, n);
  size_t fetched = 0;  // bytes of each row already asked for
  auto fetch_to = [&](size_t byte_off) {
    for (; fetched <= byte_off; fetched += 64)
      for (int q = 0; q < R; ++q) __builtin_prefetch(rows[q] + fetched + ahead);
  };
  switch (t) {
    case GgmlType::F32:
      for (; i + N <= n; i += N) {
        fetch_to(static_cast<size_t>(i) * 4);
        for (int q = 0; q < R; ++q) w[q] = hn::LoadU(df, reinterpret_cast<const float*>(rows[q]) + i);
        fn(i, w);
      }
      return i;
    case GgmlType::F16:
    case GgmlType::BF16: {
      // Both 16-bit float types widen exactly; only the element type differs.
      auto widen = [&](auto half_tag) {
        using H = decltype(half_tag);
        const hn::Rebind<H, DF> dh;
        for (; i + N <= n; i += N) {
          fetch_to(static_cast<size_t>(i) * 2);
          for (int q = 0; q < R; ++q) w[q] = hn::PromoteTo(df, hn::LoadU(dh, reinterpret_cast<const H*>(rows[q]) + i));
          fn(i, w);
        }
      };
      if (t == GgmlType::F16)
        widen(hwy::float16_t{});
      else
        widen(hwy::bfloat16_t{});
      return i;
    }
    case GgmlType::Q8_0:
      for (int64_t b = 0; b < n / kQ8_0Block; ++b) {
        const size_t off = static_cast<size_t>(b) * (2 + kQ8_0Block);
        fetch_to(off);
        VF vd[R];
        for (int q = 0; q < R; ++q) vd[q] = hn::Set(df, load_half(rows[q] + off));
        for (int64_t c = 0; c < kQ8_0Block; c += N) {
          for (int q = 0; q < R; ++q) {
            const auto* qs = reinterpret_cast<const int8_t*>(rows[q] + off + 2);
            w[q] = hn::Mul(vd[q], hn::ConvertTo(df, hn::PromoteTo(di, hn::LoadU(di8, qs + c))));
          }
          fn(b * kQ8_0Block + c, w);
        }
      }
      return n;
    case GgmlType::Q4_0: {
      const auto k8 = hn::Set(di, 8);
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
      // 16 lanes hold the whole value table d * (q - 8), q = 0..15: one
      // permute per chunk replaces subtract, convert and multiply.
      const auto levels = hn::ConvertTo(df, hn::Sub(hn::Iota(di, 0), k8));
      for (int64_t b = 0; b < n / kQ4_0Block; ++b) {
        const size_t off = static_cast<size_t>(b) * (2 + kQ4_0Block / 2);
        fetch_to(off);
        VF table[R];
        hn::Vec<decltype(di)> raw[R];
        for (int q = 0; q < R; ++q) {
          table[q] = hn::Mul(hn::Set(df, load_half(rows[q] + off)), levels);
          raw[q] = hn::PromoteTo(di, hn::LoadU(du8, rows[q] + off + 2));
        }
        for (int q = 0; q < R; ++q) w[q] = hn::TableLookupLanes(table[q], hn::IndicesFromVec(df, hn::And(raw[q], k15)));
        fn(b * kQ4_0Block, w);
        for (int q = 0; q < R; ++q)
          w[q] = hn::TableLookupLanes(table[q], hn::IndicesFromVec(df, hn::ShiftRight<4>(raw[q])));
        fn(b * kQ4_0Block + kQ4_0Block / 2, w);
      }
      return n;
#endif
      for (int64_t b = 0; b < n / kQ4_0Block; ++b) {
        const size_t off = static_cast<size_t>(b) * (2 + kQ4_0Block / 2);
        fetch_to(off);
        VF vd[R];
        for (int q = 0; q < R; ++q) vd[q] = hn::Set(df, load_half(rows[q] + off));
        for (int64_t c = 0; c < kQ4_0Block / 2; c += N) {
          hn::Vec<decltype(di)> raw[R];
          for (int q = 0; q < R; ++q) raw[q] = hn::PromoteTo(di, hn::LoadU(du8, rows[q] + off + 2 + c));
          for (int q = 0; q < R; ++q) w[q] = hn::Mul(vd[q], hn::ConvertTo(df, hn::Sub(hn::And(raw[q], k15), k8)));
          fn(b * kQ4_0Block + c, w);
          for (int q = 0; q < R; ++q) w[q] = hn::Mul(vd[q], hn::ConvertTo(df, hn::Sub(hn::ShiftRight<4>(raw[q]), k8)));
          fn(b * kQ4_0Block + kQ4_0Block / 2 + c, w);
        }
      }
      return n;
    }
    case GgmlType::Q4_K:
    case GgmlType::Q5_K: {
      const bool five = t == GgmlType::Q5_K;
      const int bytes = five ? kQ5_KBytes : kQ4_KBytes;
      const auto k1 = hn::Set(di, 1);
      for (int64_t b = 0; b < n / kQkK; ++b) {
        const size_t off = static_cast<size_t>(b) * bytes;
        fetch_to(off + bytes - 1);
        for (int j = 0; j < 4; ++j) {
          VF d0[R], mm0[R], d1[R], mm1[R];
          for (int q = 0; q < R; ++q) {
            const uint8_t* blk = rows[q] + off;
            const float d = load_half(blk), dmin = load_half(blk + 2);
            int s0, m0, s1, m1;
            kquant_scale_min(blk + 4, 2 * j, s0, m0);
            kquant_scale_min(blk + 4, 2 * j + 1, s1, m1);
            d0[q] = hn::Set(df, d * static_cast<float>(s0));
            mm0[q] = hn::Set(df, dmin * static_cast<float>(m0));
            d1[q] = hn::Set(df, d * static_cast<float>(s1));
            mm1[q] = hn::Set(df, dmin * static_cast<float>(m1));
          }
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
          if (!five) {  // Q4_K: the sub-block's 16 values d*s*q - dmin*m fit one register
            const auto levels = hn::ConvertTo(df, hn::Iota(di, 0));
            VF t0[R], t1[R];
            for (int q = 0; q < R; ++q) {
              t0[q] = hn::Sub(hn::Mul(d0[q], levels), mm0[q]);
              t1[q] = hn::Sub(hn::Mul(d1[q], levels), mm1[q]);
            }
            for (int64_t c = 0; c < 32; c += N) {
              hn::Vec<decltype(di)> raw[R];
              for (int q = 0; q < R; ++q) raw[q] = hn::PromoteTo(di, hn::LoadU(du8, rows[q] + off + 16 + 32 * j + c));
              const int64_t e = b * kQkK + 64 * j + c;
              for (int q = 0; q < R; ++q)
                w[q] = hn::TableLookupLanes(t0[q], hn::IndicesFromVec(df, hn::And(raw[q], k15)));
              fn(e, w);
              for (int q = 0; q < R; ++q)
                w[q] = hn::TableLookupLanes(t1[q], hn::IndicesFromVec(df, hn::ShiftRight<4>(raw[q])));
              fn(e + 32, w);
            }
            continue;
          }
#endif
          for (int64_t c = 0; c < 32; c += N) {
            hn::Vec<decltype(di)> lo[R], hi[R];
            for (int q = 0; q < R; ++q) {
              const uint8_t* blk = rows[q] + off;
              const auto raw = hn::PromoteTo(di, hn::LoadU(du8, blk + (five ? 48 : 16) + 32 * j + c));
              lo[q] = hn::And(raw, k15);
              hi[q] = hn::ShiftRight<4>(raw);
              if (five) {
                const auto h = hn::PromoteTo(di, hn::LoadU(du8, blk + 16 + c));
                lo[q] = hn::Or(lo[q], hn::ShiftLeft<4>(hn::And(hn::ShiftRightSame(h, 2 * j), k1)));
                hi[q] = hn::Or(hi[q], hn::ShiftLeft<4>(hn::And(hn::ShiftRightSame(h, 2 * j + 1), k1)));
              }
            }
            const int64_t e = b * kQkK + 64 * j + c;
            for (int q = 0; q < R; ++q) w[q] = hn::Sub(hn::Mul(d0[q], hn::ConvertTo(df, lo[q])), mm0[q]);
            fn(e, w);
            for (int q = 0; q < R; ++q) w[q] = hn::Sub(hn::Mul(d1[q], hn::ConvertTo(df, hi[q])), mm1[q]);
            fn(e + 32, w);
          }
        }
      }
      return n;
    }
    case GgmlType::Q6_K: {
      const auto k3 = hn::Set(di, 3), k32 = hn::Set(di, 32);
      for (int64_t b = 0; b < n / kQkK; ++b) {
        const size_t off = static_cast<size_t>(b) * kQ6_KBytes;
        fetch_to(off + kQ6_KBytes - 1);
        for (int h = 0; h < 2; ++h) {
          for (int64_t c = 0; c < 32; c += N) {
            const int is = static_cast<int>(c / 16);
            hn::Vec<decltype(di)> q1[R], q2[R], q3[R], q4[R];
            float sd[R][4];
            for (int q = 0; q < R; ++q) {
              const uint8_t* blk = rows[q] + off;
              const uint8_t* ql = blk + 64 * h;
              const uint8_t* qh = blk + 128 + 32 * h;
              const auto* sc = reinterpret_cast<const int8_t*>(blk + 192 + 8 * h);
              const float d = load_half(blk + 208);
              for (int u = 0; u < 4; ++u) sd[q][u] = d * static_cast<float>(sc[is + 2 * u]);
              const auto l0 = hn::PromoteTo(di, hn::LoadU(du8, ql + c));
              const auto l1 = hn::PromoteTo(di, hn::LoadU(du8, ql + 32 + c));
              const auto hh = hn::PromoteTo(di, hn::LoadU(du8, qh + c));
              q1[q] = hn::Sub(hn::Or(hn::And(l0, k15), hn::ShiftLeft<4>(hn::And(hh, k3))), k32);
              q2[q] = hn::Sub(hn::Or(hn::And(l1, k15), hn::ShiftLeft<4>(hn::And(hn::ShiftRight<2>(hh), k3))), k32);
              q3[q] = hn::Sub(hn::Or(hn::ShiftRight<4>(l0), hn::ShiftLeft<4>(hn::And(hn::ShiftRight<4>(hh), k3))), k32);
              q4[q] = hn::Sub(hn::Or(hn::ShiftRight<4>(l1), hn::ShiftLeft<4>(hn::ShiftRight<6>(hh))), k32);
            }
            const int64_t e = b * kQkK + 128 * h + c;
            for (int q = 0; q < R; ++q) w[q] = hn::Mul(hn::Set(df, sd[q][0]), hn::ConvertTo(df, q1[q]));
            fn(e, w);
            for (int q = 0; q < R; ++q) w[q] = hn::Mul(hn::Set(df, sd[q][1]), hn::ConvertTo(df, q2[q]));
            fn(e + 32, w);
            for (int q = 0; q < R; ++q) w[q] = hn::Mul(hn::Set(df, sd[q][2]), hn::ConvertTo(df, q3[q]));
            fn(e + 64, w);
            for (int q = 0; q < R; ++q) w[q] = hn::Mul(hn::Set(df, sd[q][3]), hn::ConvertTo(df, q4[q]));
            fn(e + 96, w);
          }
        }
      }
      return n;
    }
    case GgmlType::Q5_0:
    case GgmlType::Q5_1: {
      // Types llama.cpp falls back to where K-quant rows do not fit. Element
      // i < 16 is the low nibble of byte i, element i + 16 its high nibble;
      // bit i / i + 16 of the 32-bit qh is the fifth bit. Q5_0: d * (q - 16);
      // Q5_1: d * q + m (multiply, then add: as dequantize_row rounds).
      const bool one = t == GgmlType::Q5_1;
      const size_t bb = one ? kQ5_1Bytes : kQ5_0Bytes, qh_off = one ? 4 : 2, qs_off = one ? 8 : 6;
      const hn::RebindToUnsigned<DF> du;
      const auto lanes = hn::Iota(du, 0);
      const auto bit = hn::Set(du, 1);
      const auto k16 = hn::Set(di, 16);
      auto fifth = [&](uint32_t qh, int shift) {
        const auto shifted = hn::Shr(hn::Set(du, qh), hn::Add(lanes, hn::Set(du, static_cast<uint32_t>(shift))));
        return hn::BitCast(di, hn::ShiftLeft<4>(hn::And(shifted, bit)));
      };
      for (int64_t b = 0; b < n / kQ5Block; ++b) {
        const size_t off = static_cast<size_t>(b) * bb;
        fetch_to(off);
        VF vd[R], vm[R];
        uint32_t qh[R];
        for (int q = 0; q < R; ++q) {
          vd[q] = hn::Set(df, load_half(rows[q] + off));
          vm[q] = one ? hn::Set(df, load_half(rows[q] + off + 2)) : hn::Zero(df);
          __builtin_memcpy(&qh[q], rows[q] + off + qh_off, 4);
        }
        for (int64_t c = 0; c < kQ5Block / 2; c += N) {
          hn::Vec<decltype(di)> raw[R];
          for (int q = 0; q < R; ++q) raw[q] = hn::PromoteTo(di, hn::LoadU(du8, rows[q] + off + qs_off + c));
          for (int half = 0; half < 2; ++half) {
            for (int q = 0; q < R; ++q) {
              const auto nib = half == 0 ? hn::And(raw[q], k15) : hn::ShiftRight<4>(raw[q]);
              const auto level = hn::Or(nib, fifth(qh[q], static_cast<int>(c) + 16 * half));
              w[q] = one ? hn::Add(hn::Mul(vd[q], hn::ConvertTo(df, level)), vm[q])
                         : hn::Mul(vd[q], hn::ConvertTo(df, hn::Sub(level, k16)));
            }
            fn(b * kQ5Block + 16 * half + c, w);
          }
        }
      }
      return n;
    }
    case GgmlType::MXFP4: {
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
      // As Q4_0: the block's 16 values in one vector, one permute per chunk.
      alignas(64) static constexpr float kLevels[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
      const auto levels = hn::Load(df, kLevels);
      for (int64_t b = 0; b < n / kMxfp4Block; ++b) {
        const size_t off = static_cast<size_t>(b) * kMxfp4Bytes;
        fetch_to(off);
        VF table[R];
        hn::Vec<decltype(di)> raw[R];
        for (int q = 0; q < R; ++q) {
          table[q] = hn::Mul(hn::Set(df, mxfp4_half_scale(rows[q][off])), levels);
          raw[q] = hn::PromoteTo(di, hn::LoadU(du8, rows[q] + off + 1));
        }
        for (int q = 0; q < R; ++q) w[q] = hn::TableLookupLanes(table[q], hn::IndicesFromVec(df, hn::And(raw[q], k15)));
        fn(b * kMxfp4Block, w);
        for (int q = 0; q < R; ++q)
          w[q] = hn::TableLookupLanes(table[q], hn::IndicesFromVec(df, hn::ShiftRight<4>(raw[q])));
        fn(b * kMxfp4Block + kMxfp4Block / 2, w);
      }
      return n;
#else
      // Other targets: each block decoded through a 32-float buffer.
      for (int64_t b = 0; b < n / kMxfp4Block; ++b) {
        const size_t off = static_cast<size_t>(b) * kMxfp4Bytes;
        fetch_to(off);
        float block[R][kMxfp4Block];
        for (int q = 0; q < R; ++q) {
          const uint8_t* blk = rows[q] + off;
          const float d = mxfp4_half_scale(blk[0]);
          for (int j = 0; j < kMxfp4Block / 2; ++j) {
            block[q][j] = d * kMxfp4Doubled[blk[1 + j] & 0x0F];
            block[q][j + kMxfp4Block / 2] = d * kMxfp4Doubled[blk[1 + j] >> 4];
          }
        }
        for (int64_t c = 0; c + N <= kMxfp4Block; c += N) {
          for (int q = 0; q < R; ++q) w[q] = hn::LoadU(df, block[q] + c);
          fn(b * kMxfp4Block + c, w);
        }
      }
      return n;
#endif
    }
  }
  return 0;
}

// s + a * b in the kernels' scalar tails, fused wherever the target fuses
// its vector multiply-adds. Written as a * b + s, GCC fused it in some
// inlined copies and not in others, so a decode row (DotRows) and the same
// row in a batch (TileF32) could differ in the last bit (F16 weights, 172
// columns, AVX2).
HWY_INLINE float TailMulAdd(float a, float b, float s) {
#if HWY_NATIVE_FMA
  return __builtin_fmaf(a, b, s);
#else
  return s + a * b;  // no fused instruction to contract into
#endif
}

// Element i of an element-wise row (the tails DecodeRow leaves).
inline float element_at(GgmlType t, const uint8_t* row, int64_t i) {
  uint16_t h;
  switch (t) {
    case GgmlType::F32: {
      float f;
      __builtin_memcpy(&f, row + 4 * i, 4);
      return f;
    }
    case GgmlType::F16:
      __builtin_memcpy(&h, row + 2 * i, 2);
      return fp16_to_fp32(h);
    case GgmlType::BF16:
      __builtin_memcpy(&h, row + 2 * i, 2);
      return bf16_to_fp32(h);
    default:
      return 0.0f;
  }
}

#if SS_MASKED_TAIL
// The tail DecodeRows leaves (elements [i, n), fewer than a vector, of R
// element-wise rows: F32, F16, BF16) as vectors that are zero past n, so a
// kernel folds it into its lane sums: one masked step instead of a scalar
// multiply-add chain per row (stories260K's 172-wide rows: 12 of them).
// Below AVX-512 (where Highway's masked loads may read the whole vector)
// kernels keep the element-wise tail.
template <int R>
HWY_INLINE void DecodeTail(GgmlType t, const uint8_t* const* rows, int64_t i, int64_t n, VF* w) {
  const DF df;
  const size_t left = static_cast<size_t>(n - i);
  auto widen = [&](auto half_tag) {
    using H = decltype(half_tag);
    const hn::Rebind<H, DF> dh;
    const auto m = hn::FirstN(dh, left);
    for (int q = 0; q < R; ++q)
      w[q] = hn::PromoteTo(df, hn::MaskedLoad(m, dh, reinterpret_cast<const H*>(rows[q]) + i));
  };
  switch (t) {
    case GgmlType::F32: {
      const auto m = hn::FirstN(df, left);
      for (int q = 0; q < R; ++q) w[q] = hn::MaskedLoad(m, df, reinterpret_cast<const float*>(rows[q]) + i);
      return;
    }
    case GgmlType::F16:
      return widen(hwy::float16_t{});
    case GgmlType::BF16:
      return widen(hwy::bfloat16_t{});
    default:  // block types leave no tail (element_at's 0 for them)
      for (int q = 0; q < R; ++q) w[q] = hn::Zero(df);
  }
}

// acc[q * NT + k] += w[q] * elements [i, n) of activation row k (x + k * xs),
// the lanes past n zero: the one masked last step every float kernel takes,
// so a decode row and its batch row end alike.
template <int R, int NT>
HWY_INLINE void MulAddTail(const VF* w, const float* x, int64_t xs, int64_t i, int64_t n, VF* acc) {
  const DF df;
  const auto m = hn::FirstN(df, static_cast<size_t>(n - i));
  for (int k = 0; k < NT; ++k) {
    const VF xv = hn::MaskedLoad(m, df, x + k * xs + i);
    for (int q = 0; q < R; ++q) acc[q * NT + k] = hn::MulAdd(w[q], xv, acc[q * NT + k]);
  }
}
#endif

void DequantizeRow(GgmlType t, const uint8_t* row, float* dst, int64_t n) {
  const DF df;
  const uint8_t* rows[1] = {row};
  const int64_t done = DecodeRows<1>(t, rows, n, [&](int64_t i, const VF* w) { hn::StoreU(w[0], df, dst + i); });
  for (int64_t i = done; i < n; ++i) dst[i] = element_at(t, row, i);
}

// y[t * y_stride] = row · x_t for NT activation rows, decoding the weight row
// once. One accumulator per output, elements in DecodeRow order.
// y[0..3] = the lane sums of acc[0..3]. On AVX2/AVX-512 the four
// reductions share their shuffles (a transpose-and-add tree: about a third of
// the instructions of four separate reductions, which dominate short rows);
// elsewhere one SumOfLanes each.
HWY_INLINE void StoreSums4(VF a0, VF a1, VF a2, VF a3, float* y) {
  const VF acc[4] = {a0, a1, a2, a3};
#if HWY_TARGET == HWY_AVX3
  const __m512 t0 =
      _mm512_add_ps(_mm512_unpacklo_ps(acc[0].raw, acc[1].raw), _mm512_unpackhi_ps(acc[0].raw, acc[1].raw));
  const __m512 t1 =
      _mm512_add_ps(_mm512_unpacklo_ps(acc[2].raw, acc[3].raw), _mm512_unpackhi_ps(acc[2].raw, acc[3].raw));
  const __m512d d0 = _mm512_castps_pd(t0), d1 = _mm512_castps_pd(t1);
  const __m512 u =
      _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(d0, d1)), _mm512_castpd_ps(_mm512_unpackhi_pd(d0, d1)));
  const __m256 h = _mm256_add_ps(_mm512_castps512_ps256(u), _mm512_extractf32x8_ps(u, 1));
  _mm_storeu_ps(y, _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1)));
#elif HWY_TARGET == HWY_AVX2
  const __m256 t0 =
      _mm256_add_ps(_mm256_unpacklo_ps(acc[0].raw, acc[1].raw), _mm256_unpackhi_ps(acc[0].raw, acc[1].raw));
  const __m256 t1 =
      _mm256_add_ps(_mm256_unpacklo_ps(acc[2].raw, acc[3].raw), _mm256_unpackhi_ps(acc[2].raw, acc[3].raw));
  const __m256d d0 = _mm256_castps_pd(t0), d1 = _mm256_castps_pd(t1);
  const __m256 u =
      _mm256_add_ps(_mm256_castpd_ps(_mm256_unpacklo_pd(d0, d1)), _mm256_castpd_ps(_mm256_unpackhi_pd(d0, d1)));
  _mm_storeu_ps(y, _mm_add_ps(_mm256_castps256_ps128(u), _mm256_extractf128_ps(u, 1)));
#else
  const DF df;
  for (int q = 0; q < 4; ++q) y[q] = hn::GetLane(hn::SumOfLanes(df, acc[q]));
#endif
}

// y[k * y_stride + q] = row_q · x_k for R weight rows decoded in step and NT
// activation rows: R * NT independent multiply-add chains, elements in
// DecodeRows order. Not inlined: each instance holds a decode loop per type,
// and one MatmulRows holding all of them compiled superlinearly slowly.
template <int R, int NT>
HWY_NOINLINE void DotRows(GgmlType t, const uint8_t* const* rows, const float* x, int64_t xs, int64_t n, float* y,
                          int64_t y_stride) {
  const DF df;
  VF acc[R * NT];
  for (int a = 0; a < R * NT; ++a) acc[a] = hn::Zero(df);
  int64_t done = DecodeRows<R>(t, rows, n, [&](int64_t i, const VF* w) {
    for (int k = 0; k < NT; ++k) {
      const VF xv = hn::LoadU(df, x + k * xs + i);
      for (int q = 0; q < R; ++q) acc[q * NT + k] = hn::MulAdd(w[q], xv, acc[q * NT + k]);
    }
  });
#if SS_MASKED_TAIL
  // The same masked last step as TileF32's, so a batch (dequantized rows
  // through TileF32) keeps a decode row's bits.
  if (done < n) {
    VF w[R];
    DecodeTail<R>(t, rows, done, n, w);
    MulAddTail<R, NT>(w, x, xs, done, n, acc);
    done = n;
  }
#endif
  if constexpr (R == 4) {
    for (int k = 0; k < NT; ++k) {
      float s[4];
      StoreSums4(acc[k], acc[NT + k], acc[2 * NT + k], acc[3 * NT + k], s);
      for (int q = 0; q < R; ++q) {
        for (int64_t i = done; i < n; ++i) s[q] = TailMulAdd(element_at(t, rows[q], i), x[k * xs + i], s[q]);
        y[k * y_stride + q] = s[q];
      }
    }
    return;
  }
  for (int q = 0; q < R; ++q)
    for (int k = 0; k < NT; ++k) {
      float s = hn::GetLane(hn::SumOfLanes(df, acc[q * NT + k]));
      for (int64_t i = done; i < n; ++i) s = TailMulAdd(element_at(t, rows[q], i), x[k * xs + i], s);
      y[k * y_stride + q] = s;
    }
}

template <int R>
HWY_INLINE void DotRowsN(GgmlType t, const uint8_t* const* rows, const float* x, int64_t cols, int n, float* y,
                         int64_t y_stride) {
  if (n == 1)
    DotRows<R, 1>(t, rows, x, cols, cols, y, y_stride);
  else if (n == 2)
    DotRows<R, 2>(t, rows, x, cols, cols, y, y_stride);
  else
    DotRows<R, 3>(t, rows, x, cols, cols, y, y_stride);
}

// out[k * y_stride + r] = w_r · x_k for NR float weight rows and NT activation
// rows: NR + NT loads feed NR * NT independent multiply-add chains.
template <int NR, int NT>
HWY_INLINE void TileF32(const float* w, int64_t ws, const float* x, int64_t xs, int64_t n, float* y, int64_t y_stride) {
  const DF df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  VF acc[NR * NT];
  for (int a = 0; a < NR * NT; ++a) acc[a] = hn::Zero(df);
  int64_t i = 0;
  // Decode (NT == 1) reads each weight once: while these NR rows are read,
  // ask for the next NR (they follow in memory) as one range, NR lines a
  // step, so that the addresses come from one register (one pointer per row
  // spilled the tile's row offsets to the stack).
  const char* ahead = reinterpret_cast<const char*>(w + NR * ws);
  for (; i + N <= n; i += N) {
    VF wv[NR];
    for (int r = 0; r < NR; ++r) wv[r] = hn::LoadU(df, w + r * ws + i);
    if constexpr (NT == 1) {
      for (int r = 0; r < NR; ++r) __builtin_prefetch(ahead + 64 * r);
      ahead += 64 * NR;
    }
    for (int k = 0; k < NT; ++k) {
      const VF xv = hn::LoadU(df, x + k * xs + i);
      for (int r = 0; r < NR; ++r) acc[r * NT + k] = hn::MulAdd(wv[r], xv, acc[r * NT + k]);
    }
  }
#if SS_MASKED_TAIL
  // The last partial vector masked (DecodeTail's reason), before the lane
  // sums, in every tile shape alike.
  if (i < n) {
    const auto m = hn::FirstN(df, static_cast<size_t>(n - i));
    VF wv[NR];
    for (int r = 0; r < NR; ++r) wv[r] = hn::MaskedLoad(m, df, w + r * ws + i);
    MulAddTail<NR, NT>(wv, x, xs, i, n, acc);
    i = n;
  }
#endif
  if constexpr (NR % 4 == 0) {
    // Same reduction for every NT and every multiple of four rows (each
    // row's sum depends only on its own lanes): a row of a batch equals the
    // row alone.
    for (int k = 0; k < NT; ++k)
      for (int r0 = 0; r0 < NR; r0 += 4) {
        // With no element left (always so after the masked step) the four
        // sums go straight out; else through s, to add the rest.
        float s[4];
        float* sums = i == n ? y + k * y_stride + r0 : s;
        StoreSums4(acc[r0 * NT + k], acc[(r0 + 1) * NT + k], acc[(r0 + 2) * NT + k], acc[(r0 + 3) * NT + k], sums);
        if (i == n) continue;
        for (int r = 0; r < 4; ++r) {
          for (int64_t j = i; j < n; ++j) s[r] = TailMulAdd(w[(r0 + r) * ws + j], x[k * xs + j], s[r]);
          y[k * y_stride + r0 + r] = s[r];
        }
      }
    return;
  }
  for (int r = 0; r < NR; ++r)
    for (int k = 0; k < NT; ++k) {
      float s = hn::GetLane(hn::SumOfLanes(df, acc[r * NT + k]));
      for (int64_t j = i; j < n; ++j) s = TailMulAdd(w[r * ws + j], x[k * xs + j], s);
      y[k * y_stride + r] = s;
    }
}

template <int NR>
HWY_INLINE void TileRowsF32(const float* w, int64_t ws, const float* x, int64_t cols, int n, float* y, int64_t rows) {
  int t = 0;
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
  // 32 vector registers: 4 x 6 accumulators reuse each weight load 6 times.
  if constexpr (NR == 4)
    for (; t + 6 <= n; t += 6) TileF32<NR, 6>(w, ws, x + t * cols, cols, cols, y + t * rows, rows);
#endif
  for (; t + 4 <= n; t += 4) TileF32<NR, 4>(w, ws, x + t * cols, cols, cols, y + t * rows, rows);
  switch (n - t) {
    case 3:
      TileF32<NR, 3>(w, ws, x + t * cols, cols, cols, y + t * rows, rows);
      break;
    case 2:
      TileF32<NR, 2>(w, ws, x + t * cols, cols, cols, y + t * rows, rows);
      break;
    case 1:
      TileF32<NR, 1>(w, ws, x + t * cols, cols, cols, y + t * rows, rows);
      break;
    default:
      break;
  }
}

// Rows [r0, r1) of Y = X · Wᵀ (layout as in matmul.h).
void MatmulRows(const TensorView& w, const float* x, int n, float* y, int64_t r0, int64_t r1) {
  const int64_t cols = w.ne0, rows = w.ne1;
  if (w.type == GgmlType::F32) {
    const float* wf = w.f32();
    int64_t r = r0;
    if (n == 1) {
      // Eight rows in step: more loads in flight (decode waits on them).
      // Rows of 256 or fewer take four (the same sums, four rows each): the
      // eight row pointers did not fit the registers beside the caller's
      // loop, and short rows gave the reloads no time to hide
      // (BM_Stories260KMatmuls 22.2-25.1 -> 19.0-22.1 us in four pairs).
      if (cols > 256)
        for (; r + 8 <= r1; r += 8) TileF32<8, 1>(wf + r * cols, cols, x, cols, cols, y + r, rows);
      for (; r + 4 <= r1; r += 4) TileF32<4, 1>(wf + r * cols, cols, x, cols, cols, y + r, rows);
    } else {
      for (; r + 4 <= r1; r += 4) TileRowsF32<4>(wf + r * cols, cols, x, cols, n, y + r, rows);
    }
    for (; r < r1; ++r) TileRowsF32<1>(wf + r * cols, cols, x, cols, n, y + r, rows);
    return;
  }
  if (n < 4) {
    // Decode: four weight rows at a time are decoded in registers and used at once.
    int64_t r = r0;
    for (; r + 4 <= r1; r += 4) {
      const uint8_t* rs[4] = {w.row(r), w.row(r + 1), w.row(r + 2), w.row(r + 3)};
      DotRowsN<4>(w.type, rs, x, cols, n, y + r, rows);
    }
    for (; r < r1; ++r) {
      const uint8_t* rs[1] = {w.row(r)};
      DotRowsN<1>(w.type, rs, x, cols, n, y + r, rows);
    }
    return;
  }
  // Batches: decode four rows once into float scratch (L1/L2-resident), then
  // run the float tile over all activation rows.
  thread_local std::vector<float> scratch;
  scratch.resize(static_cast<size_t>(4 * cols));
  for (int64_t r = r0; r < r1; r += 4) {
    const int nr = static_cast<int>(std::min<int64_t>(4, r1 - r));
    for (int q = 0; q < nr; ++q) DequantizeRow(w.type, w.row(r + q), scratch.data() + q * cols, cols);
    if (nr == 4)
      TileRowsF32<4>(scratch.data(), cols, x, cols, n, y + r, rows);
    else
      for (int q = 0; q < nr; ++q) TileRowsF32<1>(scratch.data() + q * cols, cols, x, cols, n, y + r + q, rows);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace ss
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace ss {
HWY_EXPORT(MatmulRows);
HWY_EXPORT(DequantizeRow);

namespace {
// Highway's targets above the CPU cap (util/cpu_features.h), for
// hwy::DisableTargets; on x86 a lower bit is a better target.
int64_t targets_above_cap() {
#if HWY_ARCH_X86
  const uint32_t f = cpu_usable();
  if (!(f & kCpuAvx2)) return HWY_AVX2 | (HWY_AVX2 - 1);
  if (!(f & kCpuAvx512)) return HWY_AVX2 - 1;
#endif
  return 0;
}

// Brings Highway's dispatch in line with the cap whenever the cap changed
// since it was last applied (once per process unless tests change it).
void sync_cap() {
  static std::atomic<int64_t> applied{-1};
  const int64_t gen = cpu_cap_generation();
  if (applied.load(std::memory_order_acquire) == gen) return;
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  if (applied.load(std::memory_order_relaxed) == gen) return;
  hwy::DisableTargets(targets_above_cap());
  hwy::GetChosenTarget().Update(hwy::SupportedTargets());
  applied.store(gen, std::memory_order_release);
}
}  // namespace

void matmul_rows_simd(const TensorView& w, const float* x, int n, float* y, int64_t r0, int64_t r1) {
  sync_cap();
  HWY_DYNAMIC_DISPATCH(MatmulRows)(w, x, n, y, r0, r1);
}

void dequantize_row_simd(GgmlType t, const void* row, float* dst, int64_t n) {
  sync_cap();
  HWY_DYNAMIC_DISPATCH(DequantizeRow)(t, static_cast<const uint8_t*>(row), dst, n);
}

std::vector<SimdTarget> simd_targets() {
  sync_cap();
  std::vector<SimdTarget> out;
  for (int64_t t : hwy::SupportedAndGeneratedTargets()) out.push_back({t, hwy::TargetName(t)});
  return out;
}

void simd_restrict_to(int64_t target) {
  sync_cap();
  hwy::SetSupportedTargetsForTest(target);
  hwy::GetChosenTarget().Update(hwy::SupportedTargets());
}

std::string simd_active_target() {
  sync_cap();
  const int64_t best = hwy::SupportedTargets() & ~(hwy::SupportedTargets() - 1);  // lowest bit = best target
  return hwy::TargetName(best);
}
}  // namespace ss
#endif  // HWY_ONCE
