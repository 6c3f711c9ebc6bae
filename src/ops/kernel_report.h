#pragma once
// Which kernels this process runs, and why: the CPU, what it offers, the cap
// (util/cpu_features.h) and each dispatcher's choice under it. Printed by
// `sinkstream --version` / `system-info` and at the start of every command
// that loads a model (as llama.cpp's system_info line), so a bug report or a
// benchmark says which path ran.
#include <string>

namespace ss {

// One decode prefetch choice and where it came from: "default", "default for
// Zen 4", "default for Intel with AMX", or the variable that set it
// ("SINKSTREAM_PREFETCH", "SINKSTREAM_PREFETCH_Q6K", ...).
struct PrefetchReport {
  std::string choice;
  std::string source;
};

struct KernelReport {
  std::string cpu;            // brand string
  std::string detected;       // features the CPU and OS offer
  std::string cap;            // "native", "avx512", "avxvnni", "avx2", "sse4"
  bool cap_from_env = false;  // SINKSTREAM_CPU set it
  std::string usable;         // features within the cap
  std::string float_matmul;   // Highway target: "AVX3", "AVX2", ...
  std::string vector_ops;     // clone of norm/softmax/attention/SwiGLU: "avx512", "avx2", "baseline"
  std::string int8_decode;    // --act-quant int8/fast, 1-3 rows: "avx512-vnni", "avx-vnni", "avx2" or "float"
  std::string int8_batches;   // 4+ rows: "amx-int8" (from amx_min_rows), "avx512-vnni", "avx-vnni", "avx2" or "float"
  std::string bf16_batches;   // --act-quant fast, kBf16MinRows+ rows of Q4_0/Q8_0: "amx-bf16" or what runs instead
  // Decode prefetch: Q4_0's "software" or "hardware only", and for the
  // K-quants the cache their prefetch fills, "L1" or "L2" (util/cpu_features.h).
  PrefetchReport decode_prefetch, q4k_prefetch, q5k_prefetch, q6k_prefetch;
  // Whether the int8 decode kernels that run follow the four choices above:
  // the AVX-512 VNNI ones (AMX machines decode with them too) do; the AVX2 /
  // AVX-VNNI tiles and the float kernels prefetch their own fixed way.
  bool prefetch_followed = false;
};

KernelReport kernel_report();
// One line: "cpu ... | cap ... | float AVX3 | vector avx512 | int8 ... | bf16 ...".
std::string format_kernel_report(const KernelReport& r);

}  // namespace ss
