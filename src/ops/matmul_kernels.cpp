// SIMD matmul kernels, compiled once per instruction set by Highway
// (foreach_target re-includes this file) and picked at run time: AVX-512,
// AVX2, SSE4 and the portable EMU128 on x86, NEON on Arm.
//
// Weights are decoded block by block into float vectors inside registers and
// multiplied with float activations: no int8 activation quantization, so a
// quantized model computes the same function as its dequantized twin (only the
// summation order differs).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/matmul_kernels.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
// Included after foreach_target.
#include <vector>

#include "format/tensor.h"
#include <hwy/highway.h>
#include "ops/matmul_kernels.h"
#include "util/fp16.h"

HWY_BEFORE_NAMESPACE();
namespace ss {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;

inline float load_half(const uint8_t* p) {
  uint16_t h;
  __builtin_memcpy(&h, p, 2);
  return fp16_to_fp32(h);
}

// Calls fn(i, w) with float vectors w holding elements [i, i + Lanes) of the
// row, in an order fixed per type; returns how many leading elements were
// covered (the rest, fewer than Lanes, only for the element-wise types).
// Each value is computed exactly as dequantize_row computes it.
template <class Fn>
HWY_INLINE int64_t DecodeRow(GgmlType t, const uint8_t* row, int64_t n, Fn&& fn) {
  const DF df;
  const hn::RebindToSigned<DF> di;
  const hn::Rebind<uint8_t, DF> du8;
  const hn::Rebind<int8_t, DF> di8;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  const auto k15 = hn::Set(di, 15);
  int64_t i = 0;
  switch (t) {
    case GgmlType::F32: {
      const auto* f = reinterpret_cast<const float*>(row);
      for (; i + N <= n; i += N) fn(i, hn::LoadU(df, f + i));
      return i;
    }
    case GgmlType::F16: {
      const hn::Rebind<hwy::float16_t, DF> dh;
      const auto* h = reinterpret_cast<const hwy::float16_t*>(row);
      for (; i + N <= n; i += N) fn(i, hn::PromoteTo(df, hn::LoadU(dh, h + i)));
      return i;
    }
    case GgmlType::BF16: {
      const hn::Rebind<hwy::bfloat16_t, DF> dh;
      const auto* h = reinterpret_cast<const hwy::bfloat16_t*>(row);
      for (; i + N <= n; i += N) fn(i, hn::PromoteTo(df, hn::LoadU(dh, h + i)));
      return i;
    }
    case GgmlType::Q8_0:
      for (int64_t b = 0; b < n / kQ8_0Block; ++b) {
        const uint8_t* blk = row + b * (2 + kQ8_0Block);
        const auto vd = hn::Set(df, load_half(blk));
        const auto* q = reinterpret_cast<const int8_t*>(blk + 2);
        for (int64_t c = 0; c < kQ8_0Block; c += N)
          fn(b * kQ8_0Block + c, hn::Mul(vd, hn::ConvertTo(df, hn::PromoteTo(di, hn::LoadU(di8, q + c)))));
      }
      return n;
    case GgmlType::Q4_0: {
      const auto k8 = hn::Set(di, 8);
      for (int64_t b = 0; b < n / kQ4_0Block; ++b) {
        const uint8_t* blk = row + b * (2 + kQ4_0Block / 2);
        const auto vd = hn::Set(df, load_half(blk));
        for (int64_t c = 0; c < kQ4_0Block / 2; c += N) {
          const auto raw = hn::PromoteTo(di, hn::LoadU(du8, blk + 2 + c));
          fn(b * kQ4_0Block + c, hn::Mul(vd, hn::ConvertTo(df, hn::Sub(hn::And(raw, k15), k8))));
          fn(b * kQ4_0Block + kQ4_0Block / 2 + c, hn::Mul(vd, hn::ConvertTo(df, hn::Sub(hn::ShiftRight<4>(raw), k8))));
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
        const uint8_t* blk = row + b * bytes;
        const float d = load_half(blk), dmin = load_half(blk + 2);
        const uint8_t* sc = blk + 4;
        const uint8_t* qh = blk + 16;
        const uint8_t* qs = blk + (five ? 48 : 16);
        for (int j = 0; j < 4; ++j) {
          int s0, m0, s1, m1;
          kquant_scale_min(sc, 2 * j, s0, m0);
          kquant_scale_min(sc, 2 * j + 1, s1, m1);
          const auto d0 = hn::Set(df, d * static_cast<float>(s0)), mm0 = hn::Set(df, dmin * static_cast<float>(m0));
          const auto d1 = hn::Set(df, d * static_cast<float>(s1)), mm1 = hn::Set(df, dmin * static_cast<float>(m1));
          for (int64_t c = 0; c < 32; c += N) {
            const auto raw = hn::PromoteTo(di, hn::LoadU(du8, qs + 32 * j + c));
            auto lo = hn::And(raw, k15);
            auto hi = hn::ShiftRight<4>(raw);
            if (five) {
              const auto h = hn::PromoteTo(di, hn::LoadU(du8, qh + c));
              lo = hn::Or(lo, hn::ShiftLeft<4>(hn::And(hn::ShiftRightSame(h, 2 * j), k1)));
              hi = hn::Or(hi, hn::ShiftLeft<4>(hn::And(hn::ShiftRightSame(h, 2 * j + 1), k1)));
            }
            const int64_t e = b * kQkK + 64 * j + c;
            fn(e, hn::Sub(hn::Mul(d0, hn::ConvertTo(df, lo)), mm0));
            fn(e + 32, hn::Sub(hn::Mul(d1, hn::ConvertTo(df, hi)), mm1));
          }
        }
      }
      return n;
    }
    case GgmlType::Q6_K: {
      const auto k3 = hn::Set(di, 3), k32 = hn::Set(di, 32);
      for (int64_t b = 0; b < n / kQkK; ++b) {
        const uint8_t* blk = row + b * kQ6_KBytes;
        const float d = load_half(blk + 208);
        for (int h = 0; h < 2; ++h) {
          const uint8_t* ql = blk + 64 * h;
          const uint8_t* qh = blk + 128 + 32 * h;
          const auto* sc = reinterpret_cast<const int8_t*>(blk + 192 + 8 * h);
          for (int64_t c = 0; c < 32; c += N) {
            const int is = static_cast<int>(c / 16);
            const auto l0 = hn::PromoteTo(di, hn::LoadU(du8, ql + c));
            const auto l1 = hn::PromoteTo(di, hn::LoadU(du8, ql + 32 + c));
            const auto hh = hn::PromoteTo(di, hn::LoadU(du8, qh + c));
            const auto q1 = hn::Sub(hn::Or(hn::And(l0, k15), hn::ShiftLeft<4>(hn::And(hh, k3))), k32);
            const auto q2 = hn::Sub(hn::Or(hn::And(l1, k15), hn::ShiftLeft<4>(hn::And(hn::ShiftRight<2>(hh), k3))), k32);
            const auto q3 = hn::Sub(hn::Or(hn::ShiftRight<4>(l0), hn::ShiftLeft<4>(hn::And(hn::ShiftRight<4>(hh), k3))), k32);
            const auto q4 = hn::Sub(hn::Or(hn::ShiftRight<4>(l1), hn::ShiftLeft<4>(hn::ShiftRight<6>(hh))), k32);
            const int64_t e = b * kQkK + 128 * h + c;
            auto scaled = [&](int s, decltype(q1) q) {
              return hn::Mul(hn::Set(df, d * static_cast<float>(sc[s])), hn::ConvertTo(df, q));
            };
            fn(e, scaled(is, q1));
            fn(e + 32, scaled(is + 2, q2));
            fn(e + 64, scaled(is + 4, q3));
            fn(e + 96, scaled(is + 6, q4));
          }
        }
      }
      return n;
    }
  }
  return 0;
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

void DequantizeRow(GgmlType t, const uint8_t* row, float* dst, int64_t n) {
  const DF df;
  const int64_t done = DecodeRow(t, row, n, [&](int64_t i, VF w) { hn::StoreU(w, df, dst + i); });
  for (int64_t i = done; i < n; ++i) dst[i] = element_at(t, row, i);
}

// y[t * y_stride] = row · x_t for NT activation rows, decoding the weight row
// once. One accumulator per output, elements in DecodeRow order.
template <int NT>
HWY_INLINE void DotRow(GgmlType t, const uint8_t* row, const float* x, int64_t xs, int64_t n, float* y,
                       int64_t y_stride) {
  const DF df;
  VF acc[NT];
  for (int k = 0; k < NT; ++k) acc[k] = hn::Zero(df);
  const int64_t done = DecodeRow(t, row, n, [&](int64_t i, VF w) {
    for (int k = 0; k < NT; ++k) acc[k] = hn::MulAdd(w, hn::LoadU(df, x + k * xs + i), acc[k]);
  });
  for (int k = 0; k < NT; ++k) {
    float s = hn::GetLane(hn::SumOfLanes(df, acc[k]));
    for (int64_t i = done; i < n; ++i) s += element_at(t, row, i) * x[k * xs + i];
    y[k * y_stride] = s;
  }
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
  for (; i + N <= n; i += N) {
    VF wv[NR];
    for (int r = 0; r < NR; ++r) wv[r] = hn::LoadU(df, w + r * ws + i);
    for (int k = 0; k < NT; ++k) {
      const VF xv = hn::LoadU(df, x + k * xs + i);
      for (int r = 0; r < NR; ++r) acc[r * NT + k] = hn::MulAdd(wv[r], xv, acc[r * NT + k]);
    }
  }
  for (int r = 0; r < NR; ++r)
    for (int k = 0; k < NT; ++k) {
      float s = hn::GetLane(hn::SumOfLanes(df, acc[r * NT + k]));
      for (int64_t j = i; j < n; ++j) s += w[r * ws + j] * x[k * xs + j];
      y[k * y_stride + r] = s;
    }
}

template <int NR>
HWY_INLINE void TileRowsF32(const float* w, int64_t ws, const float* x, int64_t cols, int n, float* y,
                            int64_t rows) {
  int t = 0;
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
      for (; r + 8 <= r1; r += 8) TileF32<8, 1>(wf + r * cols, cols, x, cols, cols, y + r, rows);
    } else {
      for (; r + 4 <= r1; r += 4) TileRowsF32<4>(wf + r * cols, cols, x, cols, n, y + r, rows);
    }
    for (; r < r1; ++r) TileRowsF32<1>(wf + r * cols, cols, x, cols, n, y + r, rows);
    return;
  }
  if (n < 4) {
    // Decode: each weight row is decoded in registers and used at once.
    for (int64_t r = r0; r < r1; ++r) {
      const uint8_t* row = w.row(r);
      if (n == 1)
        DotRow<1>(w.type, row, x, cols, cols, y + r, rows);
      else if (n == 2)
        DotRow<2>(w.type, row, x, cols, cols, y + r, rows);
      else
        DotRow<3>(w.type, row, x, cols, cols, y + r, rows);
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

void matmul_rows_simd(const TensorView& w, const float* x, int n, float* y, int64_t r0, int64_t r1) {
  HWY_DYNAMIC_DISPATCH(MatmulRows)(w, x, n, y, r0, r1);
}

void dequantize_row_simd(GgmlType t, const void* row, float* dst, int64_t n) {
  HWY_DYNAMIC_DISPATCH(DequantizeRow)(t, static_cast<const uint8_t*>(row), dst, n);
}

std::vector<SimdTarget> simd_targets() {
  std::vector<SimdTarget> out;
  for (int64_t t : hwy::SupportedAndGeneratedTargets()) out.push_back({t, hwy::TargetName(t)});
  return out;
}

void simd_restrict_to(int64_t target) {
  hwy::SetSupportedTargetsForTest(target);
  hwy::GetChosenTarget().Update(hwy::SupportedTargets());
}

std::string simd_active_target() {
  const int64_t best = hwy::SupportedTargets() & ~(hwy::SupportedTargets() - 1);  // lowest bit = best target
  return hwy::TargetName(best);
}
}  // namespace ss
#endif  // HWY_ONCE
