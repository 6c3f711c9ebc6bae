#include "util/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace ss {
namespace {

TEST(ThreadPool, CoversEveryIndexExactlyOnce) {
  for (int threads : {1, 2, 3, 4}) {
    ThreadPool pool(threads);
    for (size_t n : {1u, 2u, 7u, 100u, 1001u}) {
      std::vector<std::atomic<int>> hits(n);
      for (int rep = 0; rep < 20; ++rep)
        pool.parallel_for(n, [&](size_t b, size_t e) {
          for (size_t i = b; i < e; ++i) hits[i]++;
        });
      for (size_t i = 0; i < n; ++i) EXPECT_EQ(hits[i].load(), 20) << threads << " " << n << " " << i;
    }
  }
}

TEST(ThreadPool, RespectsMaxParts) {
  ThreadPool pool(4);
  std::atomic<int> calls{0};
  pool.parallel_for(
      100, [&](size_t, size_t) { calls++; }, 2);
  EXPECT_EQ(calls.load(), 2);
}

// Jobs that use fewer parts than there are threads, back to back: a worker
// left out of one job must not run a part of the next twice or miss it.
TEST(ThreadPool, FewerPartsThanThreadsBackToBack) {
  ThreadPool pool(4);
  for (int rep = 0; rep < 2000; ++rep) {
    const int parts = 1 + rep % 4;
    std::vector<std::atomic<int>> hits(7);
    pool.parallel_for(
        hits.size(),
        [&](size_t b, size_t e) {
          for (size_t i = b; i < e; ++i) hits[i]++;
        },
        parts);
    for (size_t i = 0; i < hits.size(); ++i) ASSERT_EQ(hits[i].load(), 1) << "rep " << rep << " index " << i;
  }
}

// Workers that fell asleep between jobs (past the spin) still wake for the next.
TEST(ThreadPool, WakesSleepingWorkers) {
  ThreadPool pool(3);
  for (int rep = 0; rep < 5; ++rep) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    std::atomic<int> calls{0};
    pool.parallel_for(3, [&](size_t, size_t) { calls++; });
    EXPECT_EQ(calls.load(), 3);
  }
}

}  // namespace
}  // namespace ss
