#pragma once
// Progress reporting on stderr: a redrawn bar on a terminal, plain lines
// (every 10%) otherwise, so piped or redirected output is never corrupted.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace ss::cli {

class Progress {
 public:
  // unit: what done/total count ("tok", "M weights", ...).
  Progress(std::string label, bool tty, std::string unit = "tok");
  // done/total tokens; extra: text appended (e.g. running perplexity).
  void update(int64_t done, int64_t total, const std::string& extra);
  void finish();

 private:
  std::string label_;
  std::string unit_;
  bool tty_;
  std::chrono::steady_clock::time_point start_, last_draw_;
  int last_decile_ = -1;
  bool drawn_ = false;
};

bool stderr_is_tty();

}  // namespace ss::cli
