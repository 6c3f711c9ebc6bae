#include "ops/convert.h"

#include "util/cpu_features.h"
#include "util/fp16.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include "ops/x86_intrinsics.h"
#endif

namespace ss {

void f32_to_f16_row_scalar(const float* src, uint16_t* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = fp32_to_fp16(src[i]);
}

#if defined(__x86_64__) && defined(__GNUC__)
namespace {
// Eight at a time; the rest (fewer than eight) by the twin.
__attribute__((target("avx2,f16c"))) void f32_to_f16_f16c(const float* src, uint16_t* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  f32_to_f16_row_scalar(src + i, dst + i, n - i);
}
}  // namespace
#endif

void f32_to_f16_row(const float* src, uint16_t* dst, int64_t n) {
#if defined(__x86_64__) && defined(__GNUC__)
  // Every CPU with AVX2 has F16C; the cap (SINKSTREAM_CPU=sse4) takes the twin.
  if (cpu_usable(kCpuAvx2)) return f32_to_f16_f16c(src, dst, n);
#endif
  f32_to_f16_row_scalar(src, dst, n);
}

void convert_row(GgmlType t, const float* src, void* dst, int64_t n) {
  if (t == GgmlType::F16) return f32_to_f16_row(src, static_cast<uint16_t*>(dst), n);
  quantize_row(t, src, dst, n);
}

}  // namespace ss
