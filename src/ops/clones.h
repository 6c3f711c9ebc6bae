#pragma once
// SS_CLONES: compile a function for AVX-512, AVX2 and baseline x86-64 and
// pick one at load time (GCC target_clones, an ifunc). Off under the
// sanitizers, whose runtimes are not ready when ifunc resolvers run.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__) && \
    !defined(__SANITIZE_THREAD__)
#define SS_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define SS_CLONES
#endif
