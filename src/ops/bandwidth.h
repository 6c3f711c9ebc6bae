#pragma once
// Memory read bandwidth probes (STREAM-style, read-only like a decode step's
// weight sweep), using the same threads the engine uses.
#include <cstddef>
#include <cstdint>
#include <span>

#include "util/thread_pool.h"

namespace ss {

// Best of `reps` sweeps over a fresh buffer of `bytes`, in bytes per second.
double measure_read_bandwidth(ThreadPool& pool, size_t bytes, int reps = 5);

// Best of `reps` sweeps over the given memory (a decode step's weights, say),
// summed as 32-bit integers (arbitrary bytes: no float assists), in bytes per
// second: how fast this process reads exactly what decode reads, where it
// lies. Each range's size is rounded down to 256 bytes.
struct ByteRange {
  const void* data;
  size_t bytes;
};
double measure_read_bandwidth(ThreadPool& pool, std::span<const ByteRange> ranges, int reps = 5);

}  // namespace ss
