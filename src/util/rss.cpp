#include "util/rss.h"

#include <cstdio>
#include <cstring>

namespace ss {

static size_t status_kb(const char* key) {
  FILE* f = std::fopen("/proc/self/status", "r");
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

size_t current_rss_bytes() { return status_kb("VmRSS:"); }
size_t peak_rss_bytes() { return status_kb("VmHWM:"); }

}  // namespace ss
