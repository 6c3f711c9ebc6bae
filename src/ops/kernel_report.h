#pragma once
// Which kernels this process runs, and why: the CPU, what it offers, the cap
// (util/cpu_features.h) and each dispatcher's choice under it. Printed by
// `sinkstream --version` / `system-info` and at the start of every command
// that loads a model (as llama.cpp's system_info line), so a bug report or a
// benchmark says which path ran.
#include <string>

namespace ss {

struct KernelReport {
  std::string cpu;              // brand string
  std::string detected;         // features the CPU and OS offer
  std::string cap;              // "native", "avx512", "avxvnni", "avx2", "sse4"
  bool cap_from_env = false;    // SINKSTREAM_CPU set it
  std::string usable;           // features within the cap
  std::string float_matmul;     // Highway target: "AVX3", "AVX2", ...
  std::string vector_ops;       // clone of norm/softmax/attention/SwiGLU: "avx512", "avx2", "baseline"
  std::string int8_decode;      // --act-quant int8/fast, 1-3 rows: "avx512-vnni", "avx-vnni", "avx2" or "float"
  std::string int8_batches;     // 4+ rows: "amx-int8" (from amx_min_rows), "avx512-vnni", "avx-vnni", "avx2" or "float"
  std::string bf16_batches;     // --act-quant fast, kBf16MinRows+ rows of Q4_0/Q8_0: "amx-bf16" or what runs instead
  std::string decode_prefetch;  // "software" or "hardware only" (util/cpu_features.h)
  std::string decode_prefetch_source;  // "default", "default for Zen 4", "SINKSTREAM_PREFETCH"
  std::string q6k_prefetch;            // Q6_K decode's prefetch fills "L1" or "L2"
  std::string q6k_prefetch_source;     // "default", "default for Zen 4", "SINKSTREAM_PREFETCH_Q6K"
  std::string q5k_prefetch;            // the same for Q5_K decode
  std::string q5k_prefetch_source;     // "default", "default for Zen 4", "SINKSTREAM_PREFETCH_Q5K", ...
  std::string q4k_prefetch;            // the same for Q4_K decode
  std::string q4k_prefetch_source;     // "default", "default for Intel with AMX", "SINKSTREAM_PREFETCH_Q4K"
  // Whether the int8 decode kernels that run follow the four choices above:
  // the AVX-512 VNNI ones (AMX machines decode with them too) do; the AVX2 /
  // AVX-VNNI tiles and the float kernels prefetch their own fixed way.
  bool prefetch_followed = false;
};

KernelReport kernel_report();
// One line: "cpu ... | cap ... | float AVX3 | vector avx512 | int8 ... | bf16 ...".
std::string format_kernel_report(const KernelReport& r);

}  // namespace ss
