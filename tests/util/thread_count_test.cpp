// The default worker count: physical cores, cgroup limits, the override.
#include "util/thread_count.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <thread>

namespace ss {
namespace {

TEST(ThreadCount, SmtSiblingsCountOnceAndPackagesApart) {
  // Two packages of two cores, each core with two hardware threads.
  std::vector<LogicalCpu> cpus;
  for (int pkg = 0; pkg < 2; ++pkg)
    for (int smt = 0; smt < 2; ++smt)
      for (int core = 0; core < 2; ++core) cpus.push_back({pkg, core});
  EXPECT_EQ(physical_cores(cpus), 4);
  EXPECT_EQ(physical_cores({{0, 0}, {0, 1}, {0, 2}}), 3);  // no SMT
  EXPECT_EQ(physical_cores({{0, 5}, {0, 5}}), 1);          // affinity to one core's two threads
  EXPECT_EQ(physical_cores({}), 0);
}

TEST(ThreadCount, CgroupQuotaRoundsUpAndMalformedTextMeansNoLimit) {
  EXPECT_EQ(cgroup_cpu_limit("200000 100000\n"), 2);
  EXPECT_EQ(cgroup_cpu_limit("150000 100000"), 2);  // 1.5 CPUs: two threads, as nproc would not say
  EXPECT_EQ(cgroup_cpu_limit("50000 100000"), 1);
  EXPECT_EQ(cgroup_cpu_limit("max 100000\n"), std::nullopt);
  EXPECT_EQ(cgroup_cpu_limit("99999999999 1"), 256);
  for (const char* bad : {"", "max", "x 100000", "100000 y", "-5 100000", "100000 0", "1 2 3", "100000  100000"})
    EXPECT_EQ(cgroup_cpu_limit(bad), std::nullopt) << "'" << bad << "'";
}

TEST(ThreadCount, CgroupFilesFromTheLeafUpForV2AndV1) {
  auto paths = [](std::string_view text) {
    std::vector<std::string> out;
    for (const auto& f : cgroup_cpu_files(text, "/cg")) out.push_back(f.path + (f.v1 ? " v1" : ""));
    return out;
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(paths("0::/\n"), V{"/cg/cpu.max"});
  EXPECT_EQ(paths("0::/system.slice/a.service\n"),
            (V{"/cg/system.slice/a.service/cpu.max", "/cg/system.slice/cpu.max", "/cg/cpu.max"}));
  // v1 (hybrid: a named hierarchy, other controllers, an empty v2 line too).
  EXPECT_EQ(paths("9:name=systemd:/\n4:memory:/x\n2:cpu,cpuacct:/docker/ab\n0::/\n"),
            (V{"/cg/cpu,cpuacct/docker/ab/cpu.cfs_quota_us v1", "/cg/cpu,cpuacct/docker/cpu.cfs_quota_us v1",
               "/cg/cpu,cpuacct/cpu.cfs_quota_us v1", "/cg/cpu.max"}));
  EXPECT_EQ(paths("1:cpu:/\n"), V{"/cg/cpu/cpu.cfs_quota_us v1"});
  EXPECT_EQ(paths("3:cpuset:/\n2:cpuacct:/\n"), V{});  // neither is "cpu"
  // Nothing outside the mount, nothing from lines that are not cgroup lines.
  EXPECT_EQ(paths("0::/a/../../etc\n"), V{});
  EXPECT_EQ(paths("0::relative\ngarbage\n\n::\n"), V{});
  EXPECT_EQ(paths("0::/a//\n"), (V{"/cg/a/cpu.max", "/cg/cpu.max"}));
  EXPECT_EQ(cgroup_cpu_limit("-1 100000"), std::nullopt);  // v1: no quota
  EXPECT_EQ(cgroup_cpu_limit("300000 100000"), 3);
}

TEST(ThreadCount, OverrideFromTheEnvironmentAndASaneDefaultWithout) {
  const char* saved = std::getenv("SINKSTREAM_THREADS");
  const std::string keep = saved ? saved : "";
  setenv("SINKSTREAM_THREADS", "3", 1);
  EXPECT_EQ(default_thread_count().threads, 3);
  for (const char* bad : {"0", "257", "two", "2x", "-1"}) {
    setenv("SINKSTREAM_THREADS", bad, 1);
    const ThreadCountChoice c = default_thread_count();
    EXPECT_NE(c.why.find("ignored"), std::string::npos) << bad << ": " << c.why;
    EXPECT_GE(c.threads, 1);
  }
  unsetenv("SINKSTREAM_THREADS");
  const ThreadCountChoice c = default_thread_count();
  EXPECT_GE(c.threads, 1);
  EXPECT_LE(c.threads, static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  EXPECT_EQ(c.why.find("ignored"), std::string::npos) << c.why;
  // Compute-bound one-off work (quantize, make-model) counts SMT siblings
  // too: never fewer threads than decode's default, within the same limits.
  const ThreadCountChoice logical = default_thread_count(CpuUse::LogicalCpus);
  EXPECT_GE(logical.threads, c.threads) << logical.why << " / " << c.why;
  EXPECT_LE(logical.threads, static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  setenv("SINKSTREAM_THREADS", "3", 1);
  EXPECT_EQ(default_thread_count(CpuUse::LogicalCpus).threads, 3);
  unsetenv("SINKSTREAM_THREADS");
  if (saved) setenv("SINKSTREAM_THREADS", keep.c_str(), 1);
}

}  // namespace
}  // namespace ss
