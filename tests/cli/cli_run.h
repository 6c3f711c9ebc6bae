#pragma once
// Runs the sinkstream binary as a user would, capturing stdout (and stderr).
#include <sys/wait.h>

#include <cstdio>
#include <string>

namespace ss::test {

struct Run {
  int rc;
  std::string out;
};

// raw: args is the whole command line (e.g. with an `env` prefix).
inline Run run(const std::string& args, bool merge_stderr = false, bool raw = false) {
  const std::string cmd =
      (raw ? "" : std::string(SS_CLI_BINARY) + " ") + args + (merge_stderr ? " 2>&1" : " 2>/dev/null");
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

}  // namespace ss::test
