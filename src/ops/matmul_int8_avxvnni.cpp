// The AVX2 int8 tiles compiled with AVX-VNNI (matmul_int8_avx2_tiles.h):
// vpdpbusd on ymm in place of vpmaddubsw + vpmaddwd, for AVX2 CPUs that have
// it (Alder Lake and later, Sierra Forest; Zen 5 and Sapphire Rapids have it
// too, where the AVX-512 kernels run instead unless capped).
#include "ops/matmul_int8_avx2.h"
#include "util/check.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define SS_AVX2 __attribute__((target("avx2,fma,f16c,avxvnni")))
#define SS_INT8_AVX_VNNI 1
#include "ops/matmul_int8_avx2_tiles.h"
#undef SS_AVX2
#undef SS_INT8_AVX_VNNI
#endif

namespace ss {

#if defined(__x86_64__) && defined(__GNUC__)
void matmul_int8_avxvnni_rows(const TensorView& w, const QuantizedActs& xq, float* y, int64_t r0, int64_t r1) {
  int8_tiles_rows(w, xq, y, r0, r1);
}
#else
void matmul_int8_avxvnni_rows(const TensorView&, const QuantizedActs&, float*, int64_t, int64_t) {
  SS_CHECK(false && "AVX-VNNI int8 kernel on a CPU without AVX-VNNI");
}
#endif

}  // namespace ss
