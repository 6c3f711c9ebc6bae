#pragma once
// SS_CLONED: a kernel written once (as NAME_impl, marked SS_CLONE_IMPL) and
// compiled for AVX-512, AVX2 (+FMA) and baseline x86-64, one picked at each
// call from what util/cpu_features.h allows now, so SINKSTREAM_CPU and tests
// can run any of them on a machine that has the best. (GCC's target_clones
// would pick once at load time, from the CPU alone.)
//
//   SS_CLONE_IMPL void f_impl(const float* x, int n) { ... }
//   SS_CLONED(void, f, (const float* x, int n), (x, n))
//
// The implementation is inlined into each clone and compiled with its
// instruction set; helpers it calls with vector arguments or results must be
// inlined too (always_inline; builtins such as __builtin_bit_cast, never
// std::bit_cast), since the clones' vector ABIs differ and an unoptimised
// build calls ordinary functions out of line. The AVX-512 and AVX2
// clones contract a * b + c into FMA, the baseline does not: the clones agree
// within float rounding, not bit for bit, unless a kernel says otherwise.
#include "util/cpu_features.h"

#define SS_CLONE_IMPL [[maybe_unused]] static __attribute__((always_inline)) inline

#if defined(__x86_64__) && defined(__GNUC__)
// The three clones of name##_impl (IMPL512 in the AVX-512 one, IMPL2 in the
// AVX2 one, IMPL0 in the baseline) and the function that picks one.
#define SS_CLONES(ret, name, params, args, IMPL512, IMPL2, IMPL0)                                          \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma,f16c"))) static ret name##_avx512 params { \
    return IMPL512 args;                                                                                   \
  }                                                                                                        \
  __attribute__((target("avx2,fma,f16c"))) static ret name##_avx2 params { return IMPL2 args; }            \
  static ret name##_base params { return IMPL0 args; }                                                     \
  ret name params {                                                                                        \
    switch (::ss::clone_level()) {                                                                         \
      case ::ss::CloneLevel::Avx512:                                                                       \
        return name##_avx512 args;                                                                         \
      case ::ss::CloneLevel::Avx2:                                                                         \
        return name##_avx2 args;                                                                           \
      default:                                                                                             \
        return name##_base args;                                                                           \
    }                                                                                                      \
  }
#define SS_CLONED(ret, name, params, args) SS_CLONES(ret, name, params, args, name##_impl, name##_impl, name##_impl)
// As SS_CLONED for an implementation templated on its clone's CloneLevel, so
// a kernel can size its register blocks to the clone (AVX-512: 32 registers
// of 16 floats) or use what the clone's instruction set has (F16C in the
// AVX2 and AVX-512 clones, through inline assembly: the shared
// implementation cannot inline the intrinsics, as above).
#define SS_CLONED_BY_LEVEL(ret, name, params, args)                                                              \
  SS_CLONES(ret, name, params, args, name##_impl<::ss::CloneLevel::Avx512>, name##_impl<::ss::CloneLevel::Avx2>, \
            name##_impl<::ss::CloneLevel::Baseline>)
#else
#define SS_CLONED(ret, name, params, args) \
  ret name params { return name##_impl args; }
#define SS_CLONED_BY_LEVEL(ret, name, params, args) \
  ret name params { return name##_impl<::ss::CloneLevel::Baseline> args; }
#endif

namespace ss {
// Which clone SS_CLONED functions run now: the one dispatch decision, shared
// by the functions and by the report of which kernels run.
enum class CloneLevel { Baseline, Avx2, Avx512 };
// Every feature bit clone_level() looks at, and so do Highway's targets and
// the F16C conversions (ops/matmul_kernels.cpp, ops/convert.cpp): CPU
// levels that differ only outside it run the same vector code (tests walk
// one of them: tests/ops/cpu_levels.h). AVX-VNNI and AMX pick int8 and bf16
// matmul kernels only.
inline constexpr uint32_t kCloneFeatures = kCpuSse4 | kCpuAvx2 | kCpuAvx512;
inline CloneLevel clone_level() {
  const uint32_t f = cpu_usable();
  return f & kCpuAvx512 ? CloneLevel::Avx512 : f & kCpuAvx2 ? CloneLevel::Avx2 : CloneLevel::Baseline;
}
inline const char* clone_level_name() {
#if defined(__x86_64__) && defined(__GNUC__)
  switch (clone_level()) {
    case CloneLevel::Avx512:
      return "avx512";
    case CloneLevel::Avx2:
      return "avx2";
    case CloneLevel::Baseline:
      break;
  }
#endif
  return "baseline";
}
}  // namespace ss
