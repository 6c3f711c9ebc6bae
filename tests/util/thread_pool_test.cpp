#include "util/thread_pool.h"

#include <gtest/gtest.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>

#include <atomic>
#include <chrono>
#include <random>
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

// Parts of random lengths in jobs of random sizes and part counts: whichever
// thread runs a range (its worker, or the caller once it has run its own and
// the worker has not started), every index is covered exactly once.
TEST(ThreadPool, RandomJobsCoverEveryIndexOnceWhoeverRunsEachRange) {
  std::mt19937 rng(7);
  for (int threads : {2, 3, 5}) {
    ThreadPool pool(threads);
    for (int rep = 0; rep < 3000; ++rep) {
      const size_t n = 1 + rng() % 40;
      const int parts = static_cast<int>(rng() % 6);  // 0: one per thread
      const int spin = static_cast<int>(rng() % 3);
      std::vector<std::atomic<int>> hits(n);
      pool.parallel_for(
          n,
          [&](size_t b, size_t e) {
            // Uneven parts: the caller sometimes finishes first, sometimes last.
            volatile int sink = 0;
            for (int i = 0; i < spin * static_cast<int>(b) * 50; ++i) sink = sink + i;
            for (size_t i = b; i < e; ++i) hits[i]++;
          },
          parts);
      for (size_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << threads << " threads, rep " << rep << " i " << i;
    }
  }
}

#if defined(__SANITIZE_THREAD__)
#define SS_UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SS_UNDER_TSAN 1
#endif
#endif

#ifndef SS_UNDER_TSAN
std::atomic<bool> g_in_handler{false}, g_release{false};
void stall_handler(int) {
  g_in_handler.store(true);
  const timespec ms{0, 1000000};
  while (!g_release.load()) nanosleep(&ms, nullptr);
}
#endif

// A worker that cannot run (here: held in a signal handler; on a shared
// machine: not scheduled) does not hold up a job: the caller runs its range.
// Were the caller to wait for it, this test would hang until the release
// below, which comes only after the jobs.
TEST(ThreadPool, CallerRunsTheRangeOfAWorkerThatCannotRun) {
#ifdef SS_UNDER_TSAN
  GTEST_SKIP() << "ThreadSanitizer defers signals to its own safe points";
#else
  ThreadPool pool(2);
  const pthread_t self = pthread_self();
  // The worker's thread: the one that runs range 1 of some job. Range 0
  // waits (yielding, for a machine with one core) until range 1 has started,
  // so the caller does not reach range 1 first.
  std::atomic<pthread_t> worker{self};
  for (int rep = 0; rep < 1000 && pthread_equal(worker.load(), self); ++rep) {
    std::atomic<bool> started{false};
    pool.parallel_for(2, [&](size_t b, size_t) {
      if (b == 1) {
        worker = pthread_self();
        started = true;
        return;
      }
      const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(2);
      while (!started && std::chrono::steady_clock::now() < until) std::this_thread::yield();
    });
  }
  ASSERT_FALSE(pthread_equal(worker.load(), self)) << "the worker never ran a range";
  struct sigaction sa {};
  sa.sa_handler = stall_handler;
  sigemptyset(&sa.sa_mask);
  struct sigaction old {};
  ASSERT_EQ(sigaction(SIGUSR1, &sa, &old), 0);
  g_in_handler = false;
  g_release = false;
  ASSERT_EQ(pthread_kill(worker.load(), SIGUSR1), 0);
  while (!g_in_handler.load()) std::this_thread::yield();
  for (int rep = 0; rep < 100; ++rep) {
    std::vector<int> ran_here(3, 0);
    pool.parallel_for(3, [&](size_t b, size_t e) {
      for (size_t i = b; i < e; ++i) ran_here[i] = pthread_equal(pthread_self(), self) ? 1 : 2;
    });
    ASSERT_EQ(ran_here, std::vector<int>(3, 1)) << "rep " << rep;
  }
  g_release = true;
  // Back at work, the worker runs ranges again and nothing ran twice.
  std::vector<std::atomic<int>> hits(1000);
  for (int rep = 0; rep < 50; ++rep)
    pool.parallel_for(hits.size(), [&](size_t b, size_t e) {
      for (size_t i = b; i < e; ++i) hits[i]++;
    });
  for (auto& h : hits) ASSERT_EQ(h.load(), 50);
  sigaction(SIGUSR1, &old, nullptr);
#endif
}

}  // namespace
}  // namespace ss
