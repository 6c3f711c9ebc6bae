#pragma once
// A small fixed thread pool owned by the engine. parallel_for splits [0, n)
// into contiguous ranges, one per worker (the calling thread takes one), and
// returns when all ranges are done. With one thread it runs inline.
//
// A forward pass issues hundreds of small jobs, so handing one out must cost
// less than the job: a job is published with one atomic increment (no lock),
// workers and the waiting caller spin on an atomic for a short while, and
// only then sleep on it (C++20 atomic wait, a futex on Linux). Measured on a
// 2-core VM: a fork-join of two trivial parts costs ~0.5 us this way, ~1.1 us
// when both sides took a mutex per job.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

namespace ss {

class ThreadPool {
 public:
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // fn(begin, end) over a split of [0, n) into at most `max_parts` ranges
  // (default: one per thread). Not re-entrant; one caller at a time.
  void parallel_for(size_t n, const std::function<void(size_t, size_t)>& fn, int max_parts = 0);

 private:
  void worker_loop(int index);

  int n_threads_;
  std::vector<std::thread> workers_;
  // The job: written by the caller before it bumps generation_ (release),
  // read by workers after they see the new generation (acquire).
  const std::function<void(size_t, size_t)>* job_ = nullptr;
  size_t job_n_ = 0;
  int job_parts_ = 0;
  bool stop_ = false;
  std::atomic<bool> busy_{false};  // catches a second caller or a nested call
  // On separate cache lines: workers poll the first, the caller the second.
  alignas(64) std::atomic<uint32_t> generation_{0};
  alignas(64) std::atomic<int> pending_{0};
};

}  // namespace ss
