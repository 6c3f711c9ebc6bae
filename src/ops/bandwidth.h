#pragma once
// Memory read bandwidth probes (STREAM-style, read-only like a decode step's
// weight sweep), using the same threads the engine uses.
#include <cstddef>
#include <cstdint>
#include <span>

#include "util/thread_pool.h"

namespace ss {

struct ByteRange {
  const void* data;
  size_t bytes;
};

// How a sweep reads: a plain streaming sum, one stream per thread; two
// far-apart streams per thread with software prefetch (faster on some
// machines at two threads), or without it (faster at one thread on the Zen 5
// VM), or four without it, as the decode GEMVs read; Best: each, the fastest
// counts.
enum class ReadMethod { Plain, TwoStreams, TwoBareStreams, FourBareStreams, Best };
inline constexpr ReadMethod kReadMethods[] = {ReadMethod::Plain, ReadMethod::TwoStreams, ReadMethod::TwoBareStreams,
                                              ReadMethod::FourBareStreams};

// Best of `reps` sweeps (every method) over a fresh buffer of `bytes`, in
// bytes per second.
double measure_read_bandwidth(ThreadPool& pool, size_t bytes, int reps = 5);

// Best of `reps` sweeps over the given memory (a decode step's weights, say),
// summed as 32-bit integers (arbitrary bytes: no float assists), in bytes per
// second: how fast this process reads exactly what decode reads, where it
// lies. Each range's size is rounded down to 256 bytes. Best runs every
// method in each rep.
double measure_read_bandwidth(ThreadPool& pool, std::span<const ByteRange> ranges, int reps = 5,
                              ReadMethod method = ReadMethod::Best);

// One sweep by `method` (Best reads plainly): its speed and the 32-bit sum
// of every word read, so a test can check that each word is read once.
struct ReadSweep {
  double bytes_per_s;
  uint32_t sum;
};
ReadSweep read_sweep(ThreadPool& pool, std::span<const ByteRange> ranges, ReadMethod method);

}  // namespace ss
