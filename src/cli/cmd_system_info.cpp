// system-info: the CPU, the cap and the kernels this process would run.
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>
#include <utility>

#include "cli/commands.h"
#include "ops/kernel_report.h"
#include "ops/matmul.h"
#include "ops/matmul_int8.h"
#include "util/thread_count.h"

namespace ss::cli {

SystemInfoCommand::SystemInfoCommand(CLI::App& app) {
  sub_ = Flags::subcommand(app, "system-info",
                           "print the CPU, its features, the SINKSTREAM_CPU cap and the kernels each path uses");
  sub_.flag("--json", json_, "print as JSON");
}

int SystemInfoCommand::run() {
  const KernelReport r = kernel_report();
  const ThreadCountChoice threads = default_thread_count();
  if (!json_) {
    std::printf("version:      %s\n", version_string().c_str());
    std::printf("cpu:          %s\n", r.cpu.c_str());
    std::printf("detected:     %s\n", r.detected.c_str());
    std::printf(
        "cap:          %s%s\n", r.cap.c_str(),
        r.cap_from_env ? " (from SINKSTREAM_CPU)" : " (SINKSTREAM_CPU=native|avx512|avxvnni|avx2|sse4 lowers it)");
    std::printf("usable:       %s\n", r.usable.c_str());
    std::printf("float matmul: %s (Highway; --act-quant none, and every type without an int8 kernel)\n",
                r.float_matmul.c_str());
    std::printf("vector ops:   %s (RMSNorm, softmax, fused attention, SwiGLU)\n", r.vector_ops.c_str());
    std::printf("int8 decode:  %s (--act-quant int8/fast, 1-3 rows)\n", r.int8_decode.c_str());
    if (r.int8_batches == "amx-int8")
      std::printf(
          "int8 batches: amx-int8 from %d rows, Q4_K/Q5_K from %d (--act-quant int8; Q6_K and fewer rows: %s)\n",
          kAmxMinRows, amx_min_rows(GgmlType::Q4_K), r.int8_decode.c_str());
    else
      std::printf("int8 batches: %s (--act-quant int8, 4+ rows)\n", r.int8_batches.c_str());
    std::printf("fast batches: %s (--act-quant fast, %d+ rows of Q4_0/Q8_0; fewer as int8)\n", r.bf16_batches.c_str(),
                kBf16MinRows);
    std::printf("prefetch:     %s in Q4_0 decode (%s; SINKSTREAM_PREFETCH=on|off sets it)\n",
                r.decode_prefetch.choice.c_str(), r.decode_prefetch.source.c_str());
    for (const auto& [type, var, p] : {std::tuple{"Q4_K", "SINKSTREAM_PREFETCH_Q4K", &r.q4k_prefetch},
                                       {"Q5_K", "SINKSTREAM_PREFETCH_Q5K", &r.q5k_prefetch},
                                       {"Q6_K", "SINKSTREAM_PREFETCH_Q6K", &r.q6k_prefetch}})
      std::printf("              %s decode prefetches into %s (%s; %s=l1|l2 sets it)\n", type, p->choice.c_str(),
                  p->source.c_str(), var);
    if (!r.prefetch_followed)
      std::printf(
          "              (the AVX-512 VNNI decode kernels follow these; the %s ones here prefetch their own way)\n",
          r.int8_decode.c_str());
    std::printf("threads:      %d by default (%s; -t or $SINKSTREAM_THREADS sets it)\n", threads.threads,
                threads.why.c_str());
    return 0;
  }
  nlohmann::json j;
  j["version"] = version_string();
  j["cpu"] = r.cpu;
  j["detected"] = r.detected;
  j["cap"] = r.cap;
  j["cap_from_env"] = r.cap_from_env;
  j["usable"] = r.usable;
  j["float_matmul"] = r.float_matmul;
  j["vector_ops"] = r.vector_ops;
  j["int8_decode"] = r.int8_decode;
  j["int8_batches"] = r.int8_batches;
  j["fast_batches"] = r.bf16_batches;
  for (const auto& [key, p] : {std::pair{"decode_prefetch", &r.decode_prefetch},
                               {"q6k_prefetch", &r.q6k_prefetch},
                               {"q5k_prefetch", &r.q5k_prefetch},
                               {"q4k_prefetch", &r.q4k_prefetch}}) {
    j[key] = p->choice;
    j[std::string(key) + "_from"] = p->source;
  }
  j["prefetch_followed"] = r.prefetch_followed;
  j["default_threads"] = threads.threads;
  j["default_threads_from"] = threads.why;
  std::printf("%s\n", j.dump(2).c_str());
  return 0;
}

}  // namespace ss::cli
