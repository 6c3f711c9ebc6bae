#pragma once
// A small fixed thread pool owned by the engine. parallel_for splits [0, n)
// into contiguous ranges, one per worker (the calling thread takes one), and
// returns when all ranges are done. With one thread it runs inline. Between
// jobs, workers (and the caller, waiting for them) spin for a short while
// before sleeping: a forward pass issues hundreds of small jobs, and a
// futex sleep and wake on each cost more than the job.
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
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
  // (default: one per thread).
  void parallel_for(size_t n, const std::function<void(size_t, size_t)>& fn, int max_parts = 0);

 private:
  void worker_loop(int index);

  int n_threads_;
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable cv_work_;
  std::condition_variable cv_done_;
  const std::function<void(size_t, size_t)>* job_ = nullptr;
  size_t job_n_ = 0;
  int job_parts_ = 0;
  // Written under mu_; read without it while spinning.
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
};

}  // namespace ss
