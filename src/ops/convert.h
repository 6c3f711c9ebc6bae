#pragma once
// Float rows into a KV cache's element type, as format/ggml_types.h's
// quantize_row writes them, with F16 on the CPU's conversion instruction.
#include <cstdint>

#include "format/ggml_types.h"

namespace ss {
// quantize_row(t, src, dst, n), the same bits (F16 on x86 with F16C: vcvtps2ph
// rounds to nearest even as fp32_to_fp16 does; of a NaN both keep a NaN, not
// necessarily its payload). Every decode step writes a K and a V row per
// layer: element by element that was 3% of stories260K's step.
void convert_row(GgmlType t, const float* src, void* dst, int64_t n);
// F16 only, the dispatched kernel and its scalar twin.
void f32_to_f16_row(const float* src, uint16_t* dst, int64_t n);
void f32_to_f16_row_scalar(const float* src, uint16_t* dst, int64_t n);
}  // namespace ss
