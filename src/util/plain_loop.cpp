#include "util/plain_loop.h"

#include <algorithm>
#include <chrono>

namespace ss {

namespace {
// An LCG step per iteration: each depends on the last (a multiply's latency
// per iteration). The empty asm makes x opaque, so the loop is neither
// folded into a closed form nor dropped for an unused result.
void spin(int64_t iterations) {
  uint64_t x = 1;
  for (int64_t i = 0; i < iterations; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    asm volatile("" : "+r"(x));
  }
}
}  // namespace

PlainLoop::PlainLoop(double ms) {
  using Clock = std::chrono::steady_clock;
  constexpr int64_t kProbe = 1 << 16;
  // The fastest of a few probes: the ones a tick or preemption hit run long.
  double best_ns = 1e300;
  for (int i = 0; i < 8; ++i) {
    const auto t0 = Clock::now();
    spin(kProbe);
    best_ns = std::min(best_ns, std::chrono::duration<double, std::nano>(Clock::now() - t0).count());
  }
  const double per_iteration_ns = std::max(best_ns, 1.0) / kProbe;
  iterations_ = std::max<int64_t>(1, static_cast<int64_t>(ms * 1e6 / per_iteration_ns));
}

void PlainLoop::run() const { spin(iterations_); }

}  // namespace ss
