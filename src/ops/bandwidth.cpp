#include "ops/bandwidth.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <vector>

#include "ops/clones.h"
#include "util/mapped_file.h"

namespace ss {

namespace {
// Sum of words [0, n) (n % 64 == 0) in 64 independent partial sums: four
// 512-bit accumulators in the AVX-512 clone, so the adds never wait on each
// other and the loop runs as fast as memory delivers. (A float dot product
// compiled for baseline x86-64 held the first probe at about 60% of what
// the machine reads.)
SS_CLONE_IMPL uint32_t read_sum_impl(const uint32_t* x, size_t n) {
  uint32_t acc[64] = {};
  for (size_t i = 0; i < n; i += 64)
    for (int k = 0; k < 64; ++k) acc[k] += x[i + k];
  uint32_t s = 0;
  for (uint32_t a : acc) s += a;
  return s;
}
SS_CLONED(uint32_t, read_sum, (const uint32_t* x, size_t n), (x, n))

// Pieces of 64 KiB (the last of a range shorter), handed out to the threads
// as they come free.
struct Piece {
  const uint32_t* words;
  size_t n;
};

double best_sweep(ThreadPool& pool, const std::vector<Piece>& pieces, size_t bytes, int reps) {
  double best = 0;
  std::atomic<uint32_t> sink{0};
  for (int r = 0; r < reps; ++r) {
    std::atomic<size_t> next{0};
    const auto t0 = std::chrono::steady_clock::now();
    pool.parallel_for(static_cast<size_t>(pool.size()), [&](size_t, size_t) {
      uint32_t s = 0;
      for (size_t i; (i = next.fetch_add(1, std::memory_order_relaxed)) < pieces.size();)
        s += read_sum(pieces[i].words, pieces[i].n);
      sink.fetch_add(s, std::memory_order_relaxed);
    });
    const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, static_cast<double>(bytes) / sec);
  }
  return best;
}
}  // namespace

double measure_read_bandwidth(ThreadPool& pool, std::span<const ByteRange> ranges, int reps) {
  constexpr size_t kPieceWords = 16384;  // 64 KiB
  std::vector<Piece> pieces;
  size_t bytes = 0;
  for (const ByteRange& r : ranges) {
    const auto* w = static_cast<const uint32_t*>(r.data);
    const size_t words = r.bytes / 256 * 64;
    for (size_t at = 0; at < words; at += kPieceWords) pieces.push_back({w + at, std::min(kPieceWords, words - at)});
    bytes += words * 4;
  }
  return bytes == 0 ? 0 : best_sweep(pool, pieces, bytes, reps);
}

double measure_read_bandwidth(ThreadPool& pool, size_t bytes, int reps) {
  const size_t n = bytes / 4;
  // In huge pages where the system allows, as the engine keeps its
  // interleaved weights: the probe measures the best read speed the engine
  // could reach, not one held back by TLB misses.
  const auto mem = allocate_huge(n * 4);
  auto* const buf = reinterpret_cast<uint32_t*>(mem.get());
  // Written once, so every page is resident, with varied values: on this
  // project's VMs a buffer of one repeated value (zeros above all) read up to
  // 40% faster than the random-looking bytes weights are.
  uint32_t state = 1;
  for (size_t i = 0; i < n; ++i) buf[i] = state = state * 1664525u + 1013904223u;
  const ByteRange all{buf, n * 4};
  return measure_read_bandwidth(pool, std::span<const ByteRange>(&all, 1), reps);
}

}  // namespace ss
