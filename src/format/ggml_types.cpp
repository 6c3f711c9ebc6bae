#include "format/ggml_types.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "util/check.h"
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
  }
  return std::nullopt;
}

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
          reinterpret_cast<int8_t*>(blk + 2)[i] = static_cast<int8_t>(std::lround(x[i] * id));
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
          const int lo = std::min(15, static_cast<int>(x[i] * id + 8.5f));
          const int hi = std::min(15, static_cast<int>(x[i + kQ4_0Block / 2] * id + 8.5f));
          blk[2 + i] = static_cast<uint8_t>(lo | (hi << 4));
        }
      }
      return;
  }
  SS_CHECK_MSG(false, "quantize_row: unsupported type");
}

}  // namespace ss
