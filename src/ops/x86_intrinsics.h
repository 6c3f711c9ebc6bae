#pragma once
// <immintrin.h> for the x86 kernels. GCC 12.1-12.2 (Debian 12's compiler)
// warn, wrongly, that the AVX-512 intrinsics use an uninitialised value: their
// pass-through operand is _mm512_undefined_*(), a deliberate self-initialised
// variable (GCC bug 105593, fixed in 12.3). The warning points at the
// header's own lines, so it is silenced there alone; the kernels' code keeps
// -Wuninitialized.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
