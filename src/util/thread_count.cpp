#include "util/thread_count.h"

#include <sched.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
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
  if (quota == "max" || quota == "-1") return std::nullopt;
  if (std::from_chars(quota.data(), quota.data() + quota.size(), q).ptr != quota.data() + quota.size() ||
      std::from_chars(period.data(), period.data() + period.size(), p).ptr != period.data() + period.size() || q <= 0 ||
      p <= 0)
    return std::nullopt;
  return static_cast<int>(std::min<long long>((q + p - 1) / p, kMaxThreads));
}

std::vector<CgroupCpuFile> cgroup_cpu_files(std::string_view text, const std::string& root) {
  std::vector<CgroupCpuFile> files;
  // Each directory from `dir` (absolute, under a mount) up to the mount's root.
  auto walk_up = [&](const std::string& mount, std::string dir, const char* file, bool v1) {
    if (dir.empty() || dir.front() != '/' || dir.find("/..") != std::string::npos) return;
    while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
    for (;;) {
      files.push_back({mount + (dir == "/" ? "" : dir) + "/" + file, v1});
      if (dir == "/") break;
      const size_t slash = dir.rfind('/');
      dir = slash == 0 ? "/" : dir.substr(0, slash);
    }
  };
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    const std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
    // "ID:CONTROLLERS:PATH"; the path may itself hold colons.
    const size_t a = line.find(':'), b = a == std::string_view::npos ? a : line.find(':', a + 1);
    if (b == std::string_view::npos) continue;
    const std::string_view controllers = line.substr(a + 1, b - a - 1);
    const std::string path(line.substr(b + 1));
    if (controllers.empty()) {
      walk_up(root, path, "cpu.max", false);
      continue;
    }
    for (std::string_view rest = controllers; !rest.empty();) {
      const size_t comma = rest.find(',');
      if (rest.substr(0, comma) == "cpu") {
        // v1 mounts the controller under its list's name (cpu,cpuacct), with a link named cpu beside it.
        walk_up(root + "/" + std::string(controllers), path, "cpu.cfs_quota_us", true);
        break;
      }
      rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    }
  }
  return files;
}

ThreadCountChoice default_thread_count(CpuUse use) {
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
      if (use != CpuUse::PhysicalCores) continue;  // the topology is not needed
      const std::string dir = "/sys/devices/system/cpu/cpu" + std::to_string(i) + "/topology/";
      const auto package = read_int(dir + "physical_package_id"), core = read_int(dir + "core_id");
      if (!package || !core) topology = false;
      cpus.push_back({package.value_or(0), core.value_or(i)});
    }
    if (topology && !cpus.empty()) physical = physical_cores(cpus);
  }
  if (logical == 0) logical = static_cast<int>(std::thread::hardware_concurrency());
  int n = physical > 0 ? physical : logical;
  std::string why = physical > 0 ? std::to_string(n) + " physical cores" : std::to_string(n) + " CPUs";
  std::ifstream cg("/proc/self/cgroup");
  const std::string cgroups((std::istreambuf_iterator<char>(cg)), std::istreambuf_iterator<char>());
  for (const auto& f : cgroup_cpu_files(cgroups)) {
    std::ifstream in(f.path);
    std::string text;
    if (!std::getline(in, text)) continue;
    if (f.v1) {
      std::ifstream period(f.path.substr(0, f.path.size() - std::strlen("quota_us")) + "period_us");
      std::string p;
      if (!std::getline(period, p)) continue;
      text += " " + p;
    }
    if (auto limit = cgroup_cpu_limit(text); limit && *limit < n) {
      n = *limit;
      why = "a cgroup CPU limit of " + std::to_string(n) + " (" + f.path + ")";
    }
  }
  n = std::clamp(n, 1, kMaxThreads);
  return {n, ignored + why};
}

}  // namespace ss
