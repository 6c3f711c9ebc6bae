#pragma once
// A loop of dependent integer arithmetic that touches no memory, calibrated
// to a given length. Timed over and over, whatever spread its times show is
// the host's (timer ticks, a hypervisor preempting the vCPU, clock changes),
// not any program's: the floor under a decode step's p99 / p50 at that length.
#include <cstdint>

namespace ss {

class PlainLoop {
 public:
  // Calibrated on the calling thread, now, to take about `ms` per run().
  explicit PlainLoop(double ms);
  void run() const;  // safe from several threads at once

 private:
  int64_t iterations_;
};

}  // namespace ss
