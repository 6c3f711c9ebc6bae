#pragma once
// A view of a 2-D (or 1-D) weight tensor living in a mapped file or owned buffer.
// ne0 is the contiguous (inner) dimension, ne1 the number of rows.
#include <cstdint>
#include <string>

#include "format/ggml_types.h"

namespace ss {

struct TensorView {
  std::string name;
  GgmlType type = GgmlType::F32;
  int64_t ne0 = 0;  // row length (input features)
  int64_t ne1 = 1;  // rows (output features)
  const void* data = nullptr;
  // Optional second copy of the same weights in a kernel's own layout
  // (ops/interleave.h: Q4_0 16 rows at a time), read by the kernels that
  // know it; data stays valid for every other reader.
  const void* interleaved = nullptr;

  bool empty() const { return data == nullptr; }
  int64_t elements() const { return ne0 * ne1; }
  const uint8_t* row(int64_t r) const {
    return static_cast<const uint8_t*>(data) + static_cast<size_t>(r) * row_bytes(type, ne0);
  }
  const float* f32() const { return static_cast<const float*>(data); }
};

}  // namespace ss
