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
  if (saved) setenv("SINKSTREAM_THREADS", keep.c_str(), 1);
}

}  // namespace
}  // namespace ss
