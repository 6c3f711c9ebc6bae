#include "util/check.h"

namespace ss::detail {
void check_failed(const char* expr, const char* file, int line, const char* msg) {
  std::fprintf(stderr, "sinkstream: invariant failed at %s:%d: %s%s%s\n", file, line, expr, msg ? " — " : "",
               msg ? msg : "");
  std::fflush(stderr);
  std::abort();
}
}  // namespace ss::detail
