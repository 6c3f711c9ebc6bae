#include "util/thread_count.h"

#include <sched.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <fstream>
#include <set>
#include <thread>
#include <utility>

namespace ss {

namespace {

constexpr int kMaxThreads = 256;  // the -t flag's range

std::optional<int> read_int(const std::string& path) {
  std::ifstream in(path);
  int v = 0;
  if (in >> v) return v;
  return std::nullopt;
}

std::optional<int> parse_positive(std::string_view s, int max) {
  int v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || v < 1 || v > max) return std::nullopt;
  return v;
}

}  // namespace

int physical_cores(const std::vector<LogicalCpu>& cpus) {
  std::set<std::pair<int, int>> cores;
  for (const auto& c : cpus) cores.insert({c.package, c.core});
  return static_cast<int>(cores.size());
}

std::optional<int> cgroup_cpu_limit(std::string_view cpu_max) {
  while (!cpu_max.empty() && (cpu_max.back() == '\n' || cpu_max.back() == ' ')) cpu_max.remove_suffix(1);
  const size_t space = cpu_max.find(' ');
  if (space == std::string_view::npos) return std::nullopt;
  const std::string_view quota = cpu_max.substr(0, space), period = cpu_max.substr(space + 1);
  long long q = 0, p = 0;
  if (quota == "max") return std::nullopt;
  if (std::from_chars(quota.data(), quota.data() + quota.size(), q).ptr != quota.data() + quota.size() ||
      std::from_chars(period.data(), period.data() + period.size(), p).ptr != period.data() + period.size() || q <= 0 ||
      p <= 0)
    return std::nullopt;
  return static_cast<int>(std::min<long long>((q + p - 1) / p, kMaxThreads));
}

ThreadCountChoice default_thread_count() {
  std::string ignored;
  if (const char* e = std::getenv("SINKSTREAM_THREADS"); e && *e) {
    if (auto v = parse_positive(e, kMaxThreads)) return {*v, "$SINKSTREAM_THREADS"};
    ignored = "$SINKSTREAM_THREADS='" + std::string(e).substr(0, 32) + "' ignored (not 1-256); ";
  }
  int logical = 0, physical = 0;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    std::vector<LogicalCpu> cpus;
    bool topology = true;
    for (int i = 0; i < CPU_SETSIZE; ++i) {
      if (!CPU_ISSET(i, &set)) continue;
      ++logical;
      const std::string dir = "/sys/devices/system/cpu/cpu" + std::to_string(i) + "/topology/";
      const auto package = read_int(dir + "physical_package_id"), core = read_int(dir + "core_id");
      if (!package || !core) topology = false;
      cpus.push_back({package.value_or(0), core.value_or(i)});
    }
    if (topology) physical = physical_cores(cpus);
  }
  if (logical == 0) logical = static_cast<int>(std::thread::hardware_concurrency());
  int n = physical > 0 ? physical : logical;
  std::string why = physical > 0 ? std::to_string(n) + " physical cores" : std::to_string(n) + " CPUs";
  std::ifstream cg("/sys/fs/cgroup/cpu.max");
  std::string line;
  if (std::getline(cg, line))
    if (auto limit = cgroup_cpu_limit(line); limit && *limit < n) {
      n = *limit;
      why = "cgroup cpu.max allows " + std::to_string(n);
    }
  n = std::clamp(n, 1, kMaxThreads);
  return {n, ignored + why};
}

}  // namespace ss
