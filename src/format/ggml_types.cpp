#include "format/ggml_types.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "format/quantize_ref.h"
#include "util/check.h"
#include "util/float_int.h"
#include "util/fp16.h"

namespace ss {

std::optional<TypeTraits> type_traits(uint32_t raw_type) {
  switch (static_cast<GgmlType>(raw_type)) {
    case GgmlType::F32:
      return TypeTraits{"F32", 1, 4};
    case GgmlType::F16:
      return TypeTraits{"F16", 1, 2};
    case GgmlType::BF16:
      return TypeTraits{"BF16", 1, 2};
    case GgmlType::Q8_0:
      return TypeTraits{"Q8_0", kQ8_0Block, 2 + kQ8_0Block};
    case GgmlType::Q4_0:
      return TypeTraits{"Q4_0", kQ4_0Block, 2 + kQ4_0Block / 2};
    case GgmlType::Q5_0:
      return TypeTraits{"Q5_0", kQ5Block, kQ5_0Bytes};
    case GgmlType::Q5_1:
      return TypeTraits{"Q5_1", kQ5Block, kQ5_1Bytes};
    case GgmlType::Q4_K:
      return TypeTraits{"Q4_K", kQkK, kQ4_KBytes};
    case GgmlType::Q5_K:
      return TypeTraits{"Q5_K", kQkK, kQ5_KBytes};
    case GgmlType::Q6_K:
      return TypeTraits{"Q6_K", kQkK, kQ6_KBytes};
    case GgmlType::MXFP4:
      return TypeTraits{"MXFP4", kMxfp4Block, kMxfp4Bytes};
  }
  return std::nullopt;
}

bool is_quantized(GgmlType t) {
  const auto tr = type_traits(static_cast<uint32_t>(t));
  return tr && tr->block_elems > 1;
}

namespace {

float half_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return fp16_to_fp32(h);
}

// Q4_K and Q5_K share their scale layout: eight sub-blocks of 32, each with a
// 6-bit scale and a 6-bit min, values d*scale*q - dmin*min with q in [0, qmax].
void dequantize_k45(const uint8_t* blk, bool five, float* out) {
  const float d = half_at(blk), dmin = half_at(blk + 2);
  const uint8_t* sc = blk + 4;
  const uint8_t* qh = blk + 16;
  const uint8_t* qs = blk + (five ? 48 : 16);
  for (int j = 0; j < 4; ++j) {
    int s0, m0, s1, m1;
    kquant_scale_min(sc, 2 * j, s0, m0);
    kquant_scale_min(sc, 2 * j + 1, s1, m1);
    const float d0 = d * static_cast<float>(s0), mm0 = dmin * static_cast<float>(m0);
    const float d1 = d * static_cast<float>(s1), mm1 = dmin * static_cast<float>(m1);
    for (int l = 0; l < 32; ++l) {
      int lo = qs[32 * j + l] & 0x0F, hi = qs[32 * j + l] >> 4;
      if (five) {
        lo += ((qh[l] >> (2 * j)) & 1) << 4;
        hi += ((qh[l] >> (2 * j + 1)) & 1) << 4;
      }
      out[64 * j + l] = d0 * static_cast<float>(lo) - mm0;
      out[64 * j + 32 + l] = d1 * static_cast<float>(hi) - mm1;
    }
  }
}

// Q6_K: two halves of 128; element e of a half takes its low nibble from ql
// and two high bits from qh, its int8 scale from sub-block e/16.
void dequantize_q6_k(const uint8_t* blk, float* out) {
  const float d = half_at(blk + 208);
  for (int h = 0; h < 2; ++h) {
    const uint8_t* ql = blk + 64 * h;
    const uint8_t* qh = blk + 128 + 32 * h;
    const auto* sc = reinterpret_cast<const int8_t*>(blk + 192 + 8 * h);
    float* y = out + 128 * h;
    for (int l = 0; l < 32; ++l) {
      const int is = l / 16;
      const int q1 = ((ql[l] & 0x0F) | (((qh[l] >> 0) & 3) << 4)) - 32;
      const int q2 = ((ql[l + 32] & 0x0F) | (((qh[l] >> 2) & 3) << 4)) - 32;
      const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
      const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
      y[l] = d * static_cast<float>(sc[is]) * static_cast<float>(q1);
      y[l + 32] = d * static_cast<float>(sc[is + 2]) * static_cast<float>(q2);
      y[l + 64] = d * static_cast<float>(sc[is + 4]) * static_cast<float>(q3);
      y[l + 96] = d * static_cast<float>(sc[is + 6]) * static_cast<float>(q4);
    }
  }
}

// A plain min/max K-quantizer (not llama.cpp's error-minimising search): good
// enough for test and synthetic models, and exact to the format.
}  // namespace

std::string type_name(uint32_t raw_type) {
  if (auto t = type_traits(raw_type)) return t->name;
  return "ggml type " + std::to_string(raw_type);
}

size_t row_bytes(GgmlType t, int64_t n) {
  const auto tr = type_traits(static_cast<uint32_t>(t));
  SS_CHECK(tr && n % tr->block_elems == 0);
  return static_cast<size_t>(n / tr->block_elems) * static_cast<size_t>(tr->block_bytes);
}

void dequantize_row(GgmlType t, const void* src, float* dst, int64_t n) {
  const auto* p = static_cast<const uint8_t*>(src);
  switch (t) {
    case GgmlType::F32:
      std::memcpy(dst, src, static_cast<size_t>(n) * 4);
      return;
    case GgmlType::F16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        dst[i] = fp16_to_fp32(h);
      }
      return;
    case GgmlType::BF16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        dst[i] = bf16_to_fp32(h);
      }
      return;
    case GgmlType::Q8_0:
      for (int64_t b = 0; b < n / kQ8_0Block; ++b) {
        const uint8_t* blk = p + b * (2 + kQ8_0Block);
        uint16_t dh;
        std::memcpy(&dh, blk, 2);
        const float d = fp16_to_fp32(dh);
        const auto* q = reinterpret_cast<const int8_t*>(blk + 2);
        for (int i = 0; i < kQ8_0Block; ++i) dst[b * kQ8_0Block + i] = d * static_cast<float>(q[i]);
      }
      return;
    case GgmlType::Q4_0:
      // ggml layout: 16 bytes hold 32 nibbles; low nibbles are elements 0..15,
      // high nibbles are elements 16..31; values are offset by 8.
      for (int64_t b = 0; b < n / kQ4_0Block; ++b) {
        const uint8_t* blk = p + b * (2 + kQ4_0Block / 2);
        uint16_t dh;
        std::memcpy(&dh, blk, 2);
        const float d = fp16_to_fp32(dh);
        const uint8_t* q = blk + 2;
        float* out = dst + b * kQ4_0Block;
        for (int i = 0; i < kQ4_0Block / 2; ++i) {
          out[i] = d * static_cast<float>((q[i] & 0x0F) - 8);
          out[i + kQ4_0Block / 2] = d * static_cast<float>((q[i] >> 4) - 8);
        }
      }
      return;
    case GgmlType::Q5_0:
    case GgmlType::Q5_1:
      // Elements i and i + 16 share byte i (low / high nibble); bit i and
      // i + 16 of qh are their fifth bits. Q5_0 is offset by 16, Q5_1 by m.
      for (int64_t b = 0; b < n / kQ5Block; ++b) {
        const bool one = t == GgmlType::Q5_1;
        const uint8_t* blk = p + b * (one ? kQ5_1Bytes : kQ5_0Bytes);
        const float d = half_at(blk), m = one ? half_at(blk + 2) : 0.0f;
        uint32_t qh;
        std::memcpy(&qh, blk + (one ? 4 : 2), 4);
        const uint8_t* q = blk + (one ? 8 : 6);
        float* out = dst + b * kQ5Block;
        for (int i = 0; i < 16; ++i) {
          const int lo = (q[i] & 0x0F) | static_cast<int>(((qh >> i) & 1) << 4);
          const int hi = (q[i] >> 4) | static_cast<int>(((qh >> (i + 16)) & 1) << 4);
          out[i] = one ? d * static_cast<float>(lo) + m : d * static_cast<float>(lo - 16);
          out[i + 16] = one ? d * static_cast<float>(hi) + m : d * static_cast<float>(hi - 16);
        }
      }
      return;
    case GgmlType::Q4_K:
    case GgmlType::Q5_K:
      for (int64_t b = 0; b < n / kQkK; ++b)
        dequantize_k45(p + b * (t == GgmlType::Q5_K ? kQ5_KBytes : kQ4_KBytes), t == GgmlType::Q5_K, dst + b * kQkK);
      return;
    case GgmlType::Q6_K:
      for (int64_t b = 0; b < n / kQkK; ++b) dequantize_q6_k(p + b * kQ6_KBytes, dst + b * kQkK);
      return;
    case GgmlType::MXFP4:
      for (int64_t b = 0; b < n / kMxfp4Block; ++b) {
        const uint8_t* blk = p + b * kMxfp4Bytes;
        const float d = mxfp4_half_scale(blk[0]);
        float* out = dst + b * kMxfp4Block;
        for (int i = 0; i < kMxfp4Block / 2; ++i) {
          out[i] = d * kMxfp4Doubled[blk[1 + i] & 0x0F];
          out[i + kMxfp4Block / 2] = d * kMxfp4Doubled[blk[1 + i] >> 4];
        }
      }
      return;
  }
  SS_CHECK_MSG(false, "dequantize_row: unsupported type");
}

void quantize_row(GgmlType t, const float* src, void* dst, int64_t n) {
  auto* p = static_cast<uint8_t*>(dst);
  switch (t) {
    case GgmlType::F32:
      std::memcpy(dst, src, static_cast<size_t>(n) * 4);
      return;
    case GgmlType::F16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = fp32_to_fp16(src[i]);
        std::memcpy(p + 2 * i, &h, 2);
      }
      return;
    case GgmlType::BF16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = fp32_to_bf16(src[i]);
        std::memcpy(p + 2 * i, &h, 2);
      }
      return;
    case GgmlType::Q8_0:
      for (int64_t b = 0; b < n / kQ8_0Block; ++b) {
        const float* x = src + b * kQ8_0Block;
        float amax = 0;
        for (int i = 0; i < kQ8_0Block; ++i) amax = std::max(amax, std::fabs(x[i]));
        const float d = amax / 127.0f;
        const float id = d != 0 ? 1.0f / d : 0.0f;
        uint8_t* blk = p + b * (2 + kQ8_0Block);
        const uint16_t dh = fp32_to_fp16(d);
        std::memcpy(blk, &dh, 2);
        for (int i = 0; i < kQ8_0Block; ++i)
          reinterpret_cast<int8_t*>(blk + 2)[i] =
              static_cast<int8_t>(std::clamp(saturate_to_int(std::round(x[i] * id)), -127, 127));
      }
      return;
    case GgmlType::Q4_0:
      for (int64_t b = 0; b < n / kQ4_0Block; ++b) {
        const float* x = src + b * kQ4_0Block;
        float amax = 0, maxv = 0;
        for (int i = 0; i < kQ4_0Block; ++i) {
          if (std::fabs(x[i]) > amax) {
            amax = std::fabs(x[i]);
            maxv = x[i];
          }
        }
        const float d = maxv / -8.0f;
        const float id = d != 0 ? 1.0f / d : 0.0f;
        uint8_t* blk = p + b * (2 + kQ4_0Block / 2);
        const uint16_t dh = fp32_to_fp16(d);
        std::memcpy(blk, &dh, 2);
        for (int i = 0; i < kQ4_0Block / 2; ++i) {
          const int lo = level_of(x[i] * id, 8, 15), hi = level_of(x[i + kQ4_0Block / 2] * id, 8, 15);
          blk[2 + i] = static_cast<uint8_t>(lo | (hi << 4));
        }
      }
      return;
    case GgmlType::Q5_0:
      for (int64_t b = 0; b < n / kQ5Block; ++b) quantize_block_q5_0(src + b * kQ5Block, p + b * kQ5_0Bytes);
      return;
    case GgmlType::Q5_1:
      for (int64_t b = 0; b < n / kQ5Block; ++b) quantize_block_q5_1(src + b * kQ5Block, p + b * kQ5_1Bytes);
      return;
    case GgmlType::Q4_K:
    case GgmlType::Q5_K:
      for (int64_t b = 0; b < n / kQkK; ++b)
        quantize_block_k45(src + b * kQkK, t == GgmlType::Q5_K,
                           p + b * (t == GgmlType::Q5_K ? kQ5_KBytes : kQ4_KBytes));
      return;
    case GgmlType::Q6_K:
      for (int64_t b = 0; b < n / kQkK; ++b) quantize_block_q6_k(src + b * kQkK, p + b * kQ6_KBytes);
      return;
    case GgmlType::MXFP4:
      // The exponent puts the largest magnitude in E2M1's top binade (4..6
      // times 2^(e-127)); each element takes its nearest code.
      for (int64_t b = 0; b < n / kMxfp4Block; ++b) {
        const float* x = src + b * kMxfp4Block;
        float amax = 0;
        for (int i = 0; i < kMxfp4Block; ++i) amax = std::max(amax, std::fabs(x[i]));
        // log2 of an infinite amax is infinite: bounded before the integer.
        const float top = std::clamp(std::floor(std::log2(amax)), -256.0f, 256.0f);
        const int e = amax > 0 ? std::clamp(saturate_to_int(top) - 2 + 127, 1, 254) : 0;
        const float d = mxfp4_half_scale(static_cast<uint8_t>(e));
        uint8_t* blk = p + b * kMxfp4Bytes;
        blk[0] = static_cast<uint8_t>(e);
        auto code = [&](float v) {
          int best = 0;
          float err = INFINITY;
          for (int c = 0; c < 16; ++c)
            if (const float e2 = std::fabs(d * kMxfp4Doubled[c] - v); e2 < err) {
              err = e2;
              best = c;
            }
          return best;
        };
        for (int i = 0; i < kMxfp4Block / 2; ++i)
          blk[1 + i] = static_cast<uint8_t>(code(x[i]) | (code(x[i + kMxfp4Block / 2]) << 4));
      }
      return;
  }
  SS_CHECK_MSG(false, "quantize_row: unsupported type");
}

}  // namespace ss
