#pragma once
// Tensor element types as numbered by GGUF (ggml_type), with block layouts.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace ss {

enum class GgmlType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q8_0 = 8,
  BF16 = 30,
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

// Quantizes n floats into dst (used by the GGUF writer for test models).
void quantize_row(GgmlType t, const float* src, void* dst, int64_t n);

constexpr int kQ8_0Block = 32;
constexpr int kQ4_0Block = 32;

}  // namespace ss
