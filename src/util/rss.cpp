#include "util/rss.h"

#include <cstdio>
#include <cstring>

namespace ss {

static size_t proc_kb(const char* file, const char* key) {
  FILE* f = std::fopen(file, "r");
  if (!f) return 0;
  char line[256];
  size_t kb = 0;
  const size_t n = std::strlen(key);
  while (std::fgets(line, sizeof line, f))
    if (std::strncmp(line, key, n) == 0) {
      std::sscanf(line + n, "%zu", &kb);
      break;
    }
  std::fclose(f);
  return kb * 1024;
}

size_t current_rss_bytes() { return proc_kb("/proc/self/status", "VmRSS:"); }
size_t peak_rss_bytes() { return proc_kb("/proc/self/status", "VmHWM:"); }
size_t anon_huge_page_bytes() { return proc_kb("/proc/self/smaps_rollup", "AnonHugePages:"); }

}  // namespace ss
