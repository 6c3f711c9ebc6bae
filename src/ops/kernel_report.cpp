#include "ops/kernel_report.h"

#include "ops/clones.h"
#include "ops/matmul_bf16.h"
#include "ops/matmul_int8.h"
#include "ops/matmul_kernels.h"
#include "util/cpu_features.h"

namespace ss {

KernelReport kernel_report() {
  KernelReport r;
  r.cpu = cpu_model_name();
  r.detected = cpu_feature_names(cpu_detected());
  r.cap = cpu_level_name(cpu_cap());
  r.cap_from_env = cpu_cap_from_env();
  r.usable = cpu_feature_names(cpu_usable());
  r.float_matmul = simd_active_target();
  r.vector_ops = clone_level_name();
  // Asked of the int8 and bf16 dispatchers themselves, so the report cannot
  // name a kernel that does not run.
  const std::string int8 = int8_kernels();
  r.int8_decode = int8 == "none" ? "float" : int8 == "avx2" || int8 == "avx-vnni" ? int8 : "avx512-vnni";
  r.int8_batches = int8.starts_with("amx") ? "amx-int8" : r.int8_decode;
  r.bf16_batches = bf16_tiles_usable() ? "amx-bf16" : r.int8_batches;
  const auto cache = [](PrefetchTarget t) { return t == PrefetchTarget::L2 ? "L2" : "L1"; };
  r.decode_prefetch = {decode_prefetch() == DecodePrefetch::Software ? "software" : "hardware only",
                       decode_prefetch_source()};
  r.q4k_prefetch = {cache(q4k_prefetch_target()), q4k_prefetch_source()};
  r.q5k_prefetch = {cache(q5k_prefetch_target()), q5k_prefetch_source()};
  r.q6k_prefetch = {cache(q6k_prefetch_target()), q6k_prefetch_source()};
  r.prefetch_followed = r.int8_decode == "avx512-vnni";
  return r;
}

std::string format_kernel_report(const KernelReport& r) {
  return "cpu " + r.cpu + " (" + r.detected + ") | cap " + r.cap + (r.cap_from_env ? " (SINKSTREAM_CPU)" : "") +
         " | float matmul " + r.float_matmul + " | vector ops " + r.vector_ops + " | int8 decode " + r.int8_decode +
         ", batches " + r.int8_batches + " | fast batches " + r.bf16_batches + " | decode prefetch " +
         (r.prefetch_followed ? r.decode_prefetch.choice + ", Q4_K into " + r.q4k_prefetch.choice + ", Q5_K into " +
                                    r.q5k_prefetch.choice + ", Q6_K into " + r.q6k_prefetch.choice
                              : "the " + r.int8_decode + " kernels' own");
}

}  // namespace ss
