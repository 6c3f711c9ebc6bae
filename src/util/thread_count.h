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
// rounded up; nullopt for no limit or text that is not that format. A v1
// cgroup's cpu.cfs_quota_us and cpu.cfs_period_us, joined by a space, read
// the same way (a quota of -1: no limit).
std::optional<int> cgroup_cpu_limit(std::string_view cpu_max);

// Where this process's CPU limits may be, from /proc/self/cgroup's text:
// for the v2 hierarchy ("0::PATH") cpu.max in PATH's directory and each
// above it; for a v1 "cpu" controller, the cfs_quota_us file likewise
// (its cfs_period_us beside it). Inside a container the host's PATH is
// often absent and the container's own limit sits at the mount's root,
// which the walk up reaches.
struct CgroupCpuFile {
  std::string path;
  bool v1 = false;  // cpu.cfs_quota_us (period beside it), else cpu.max
};
std::vector<CgroupCpuFile> cgroup_cpu_files(std::string_view proc_self_cgroup,
                                            const std::string& root = "/sys/fs/cgroup");

struct ThreadCountChoice {
  int threads = 1;
  std::string why;  // e.g. "2 physical cores" or "$SINKSTREAM_THREADS"
};

// What the threads will do: decode and prefill (memory-bound, or sharing a
// core's vector units) run one per physical core; one-off compute over
// independent rows (quantizing, generating a model, repacking weights at
// load) gains from an SMT sibling too, so one per logical CPU.
enum class CpuUse { PhysicalCores, LogicalCpus };

// $SINKSTREAM_THREADS (1-256) when set and valid; else the physical cores
// (or logical CPUs) in this process's CPU affinity set, no more than the
// smallest of its cgroups' CPU limits, at most 256; 1 where nothing can be
// read.
ThreadCountChoice default_thread_count(CpuUse use = CpuUse::PhysicalCores);

}  // namespace ss
