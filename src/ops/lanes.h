#pragma once
// 16-float vectors (GCC/Clang vector extensions) for the SS_CLONED kernels:
// one zmm on AVX-512, two ymm on AVX2, four xmm on the baseline clone, the
// same operations lane by lane in each.
#include <cstdint>

// The vectors are only passed between functions inlined into one clone;
// GCC's note that passing them by value would differ between ISAs concerns
// an ABI no call here uses.
#if defined(__clang__)
#pragma clang diagnostic ignored "-Wpsabi"
#elif defined(__GNUC__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

namespace ss {

typedef float Lanes __attribute__((vector_size(16 * sizeof(float))));
typedef int32_t LaneInts __attribute__((vector_size(16 * sizeof(float))));

}  // namespace ss
