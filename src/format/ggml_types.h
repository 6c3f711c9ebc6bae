#pragma once
// Tensor element types as numbered by GGUF (ggml_type), with block layouts.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>

namespace ss {

enum class GgmlType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  BF16 = 30,
  MXFP4 = 39,
};

struct TypeTraits {
  const char* name;
  int block_elems;  // elements per block
  int block_bytes;  // bytes per block
};

// nullopt for types sinkstream does not (yet) support.
std::optional<TypeTraits> type_traits(uint32_t raw_type);
std::string type_name(uint32_t raw_type);

// Bytes of a row of n elements; n must be a multiple of the block size.
size_t row_bytes(GgmlType t, int64_t n);

// Dequantizes n elements (a multiple of the block size) of row `src` into dst.
void dequantize_row(GgmlType t, const void* src, float* dst, int64_t n);

// Quantizes n floats into dst with ggml's reference choice of scales
// (format/quantize_ref.h for the K-quants and Q5_0/Q5_1).
void quantize_row(GgmlType t, const float* src, void* dst, int64_t n);

constexpr int kQ8_0Block = 32;
constexpr int kQ4_0Block = 32;
constexpr int kQ4_0Bytes = 2 + kQ4_0Block / 2;  // f16 d, nibbles
constexpr int kQ5Block = 32;
constexpr int kQ5_0Bytes = 2 + 4 + kQ5Block / 2;      // f16 d, 32 fifth bits, nibbles
constexpr int kQ5_1Bytes = 2 + 2 + 4 + kQ5Block / 2;  // f16 d, f16 m, fifth bits, nibbles
// K-quants: super-blocks of 256 elements (ggml's QK_K).
constexpr int kQkK = 256;
constexpr int kQ4_KBytes = 4 + 12 + kQkK / 2;                    // d, dmin, 6-bit scales+mins, nibbles
constexpr int kQ5_KBytes = 4 + 12 + kQkK / 8 + kQkK / 2;         // ... plus one high bit per element
constexpr int kQ6_KBytes = kQkK / 2 + kQkK / 4 + kQkK / 16 + 2;  // low nibbles, high 2 bits, int8 scales, d

// The 6-bit scale and min of sub-block j (0..7) of a Q4_K/Q5_K super-block,
// unpacked from its 12 scale bytes.
inline void kquant_scale_min(const uint8_t* s, int j, int& scale, int& min) {
  if (j < 4) {
    scale = s[j] & 63;
    min = s[j + 4] & 63;
  } else {
    scale = (s[j + 4] & 0x0F) | ((s[j - 4] >> 6) << 4);
    min = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

// All eight scales and mins at once, one byte each (the values
// kquant_scale_min gives), unpacked on 32-bit words for the SIMD kernels.
inline void kquant_scales_mins(const uint8_t* s, uint8_t* scale, uint8_t* min) {
  uint32_t u[3];
  std::memcpy(u, s, 12);
  constexpr uint32_t k6 = 0x3f3f3f3f, k4 = 0x0f0f0f0f, k2 = 0x03030303;
  const uint32_t sc0 = u[0] & k6, sc1 = (u[2] & k4) | (((u[0] >> 6) & k2) << 4);
  const uint32_t m0 = u[1] & k6, m1 = ((u[2] >> 4) & k4) | (((u[1] >> 6) & k2) << 4);
  std::memcpy(scale, &sc0, 4);
  std::memcpy(scale + 4, &sc1, 4);
  std::memcpy(min, &m0, 4);
  std::memcpy(min + 4, &m1, 4);
}

// MXFP4 (OCP microscaling, gpt-oss's expert weights): blocks of 32 as one
// E8M0 exponent byte e, then 16 bytes of 4-bit E2M1 codes (element i < 16 in
// the low nibble of byte i, element i + 16 in its high nibble). Element =
// kMxfp4Doubled[code] * 2^(e - 128), i.e. the E2M1 value times 2^(e - 127).
constexpr int kMxfp4Block = 32;
constexpr int kMxfp4Bytes = 1 + kMxfp4Block / 2;
inline constexpr int8_t kMxfp4Doubled[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
// 2^(e - 128) for an E8M0 byte (exact: every value is a power of two a float holds).
inline float mxfp4_half_scale(uint8_t e) {
  uint32_t bits = e < 2 ? 0x00200000u << e : static_cast<uint32_t>(e - 1) << 23;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// True for the block-quantized types (rows must be a multiple of the block).
bool is_quantized(GgmlType t);

}  // namespace ss
