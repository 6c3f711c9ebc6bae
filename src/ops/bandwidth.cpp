#include "ops/bandwidth.h"

#include <algorithm>
#include <chrono>
#include <mutex>
#include <vector>

#include "ops/matmul.h"
#include "util/mapped_file.h"

namespace ss {

double measure_read_bandwidth(ThreadPool& pool, size_t bytes, int reps) {
  const size_t n = bytes / sizeof(float);
  // In huge pages where the system allows, as the engine keeps its
  // interleaved weights: the probe measures the best read speed the engine
  // could reach, not one held back by TLB misses.
  const auto mem = allocate_huge(n * sizeof(float));
  float* const buf = reinterpret_cast<float*>(mem.get());
  std::fill(buf, buf + n, 1.0f);  // written once: every page is resident
  const std::vector<float> ones(4096, 1.0f);
  double best = 0;
  volatile float sink = 0;
  for (int r = 0; r < reps; ++r) {
    std::mutex mu;
    float total = 0;
    const auto t0 = std::chrono::steady_clock::now();
    pool.parallel_for(n / 4096, [&](size_t b, size_t e) {
      float s = 0;
      for (size_t i = b; i < e; ++i) s += dot_f32(buf + i * 4096, ones.data(), 4096);
      std::lock_guard<std::mutex> lock(mu);
      total += s;
    });
    const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    sink = sink + total;
    best = std::max(best, static_cast<double>(n / 4096 * 4096 * sizeof(float)) / sec);
  }
  return best;
}

}  // namespace ss
