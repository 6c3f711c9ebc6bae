#include "util/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
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

}  // namespace
}  // namespace ss
