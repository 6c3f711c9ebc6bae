#pragma once
// Always-on invariant checks (also in Release): a broken invariant is a bug in
// sinkstream, so it reports file:line and aborts. Never use for untrusted input;
// that gets a Result.
#include <cstdio>
#include <cstdlib>

namespace ss::detail {
[[noreturn]] void check_failed(const char* expr, const char* file, int line, const char* msg);
}

#define SS_CHECK(cond)                                                           \
  do {                                                                           \
    if (!(cond)) ::ss::detail::check_failed(#cond, __FILE__, __LINE__, nullptr); \
  } while (0)

#define SS_CHECK_MSG(cond, msg)                                              \
  do {                                                                       \
    if (!(cond)) ::ss::detail::check_failed(#cond, __FILE__, __LINE__, msg); \
  } while (0)
