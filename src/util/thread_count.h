#pragma once
// How many worker threads a command uses when none is asked for: one per
// physical core this process may run on, as llama.cpp's default does. SMT
// siblings share a core's execution units and its share of memory
// bandwidth, so a second thread per core slows memory-bound decode.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ss {

// One logical CPU the process may run on, as sysfs describes it.
struct LogicalCpu {
  int package = 0;  // topology/physical_package_id
  int core = 0;     // topology/core_id
};

// Distinct (package, core) pairs: the physical cores under these CPUs.
int physical_cores(const std::vector<LogicalCpu>& cpus);

// CPUs a cgroup v2 `cpu.max` ("QUOTA PERIOD" or "max PERIOD") allows,
// rounded up; nullopt for no limit or text that is not that format.
std::optional<int> cgroup_cpu_limit(std::string_view cpu_max);

struct ThreadCountChoice {
  int threads = 1;
  std::string why;  // e.g. "2 physical cores" or "$SINKSTREAM_THREADS"
};

// $SINKSTREAM_THREADS (1-256) when set and valid; else the physical cores
// in this process's CPU affinity set, no more than its cgroup's CPU limit,
// at most 256; 1 where nothing can be read.
ThreadCountChoice default_thread_count();

}  // namespace ss
