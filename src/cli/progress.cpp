#include "cli/progress.h"

#include <unistd.h>

namespace ss::cli {

bool stderr_is_tty() { return isatty(STDERR_FILENO) == 1; }

Progress::Progress(std::string label, bool tty, std::string unit)
    : label_(std::move(label)),
      unit_(std::move(unit)),
      tty_(tty),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {}

void Progress::update(int64_t done, int64_t total, const std::string& extra) {
  const auto now = std::chrono::steady_clock::now();
  const double secs = std::chrono::duration<double>(now - start_).count();
  const double rate = secs > 0 ? static_cast<double>(done) / secs : 0;
  const double eta = rate > 0 ? static_cast<double>(total - done) / rate : 0;
  const double frac = total > 0 ? static_cast<double>(done) / static_cast<double>(total) : 1;
  if (tty_) {
    if (done < total && now - last_draw_ < std::chrono::milliseconds(100)) return;
    last_draw_ = now;
    constexpr int kWidth = 30;
    const int fill = static_cast<int>(frac * kWidth);
    std::string bar(static_cast<size_t>(fill), '#');
    bar.resize(kWidth, '.');
    std::fprintf(stderr, "\r\033[K%-16s [%s] %3.0f%% %lld/%lld %s %8.0f %s/s ETA %5.0fs %s", label_.c_str(),
                 bar.c_str(), frac * 100, static_cast<long long>(done), static_cast<long long>(total), unit_.c_str(),
                 rate, unit_.c_str(), eta, extra.c_str());
    drawn_ = true;
  } else {
    const int decile = static_cast<int>(frac * 10);
    if (decile == last_decile_) return;
    last_decile_ = decile;
    std::fprintf(stderr, "%s: %3.0f%% %lld/%lld %s %.0f %s/s ETA %.0fs %s\n", label_.c_str(), frac * 100,
                 static_cast<long long>(done), static_cast<long long>(total), unit_.c_str(), rate, unit_.c_str(), eta,
                 extra.c_str());
  }
  std::fflush(stderr);
}

void Progress::finish() {
  if (tty_ && drawn_) std::fprintf(stderr, "\n");
  std::fflush(stderr);
}

}  // namespace ss::cli
