#pragma once
// Memory read bandwidth probe (STREAM-style, read-only like a decode step's
// weight sweep), using the same threads the engine uses.
#include <cstddef>

#include "util/thread_pool.h"

namespace ss {

// Best of `reps` sweeps over a buffer of `bytes`, in bytes per second.
double measure_read_bandwidth(ThreadPool& pool, size_t bytes, int reps = 5);

}  // namespace ss
