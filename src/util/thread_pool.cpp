#include "util/thread_pool.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "util/check.h"

namespace ss {

ThreadPool::ThreadPool(int n_threads) : n_threads_(std::max(1, n_threads)) {
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_work_.notify_all();
  for (auto& t : workers_) t.join();
}

namespace {
// Spin at most this long for a job or for the workers to finish.
constexpr auto kSpin = std::chrono::microseconds(100);

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// True once pred() holds within kSpin.
template <class Pred>
bool spin_until(Pred pred) {
  const auto deadline = std::chrono::steady_clock::now() + kSpin;
  for (int i = 0;; ++i) {
    if (pred()) return true;
    cpu_relax();
    if ((i & 63) == 63 && std::chrono::steady_clock::now() > deadline) return false;
  }
}
}  // namespace

static void run_part(const std::function<void(size_t, size_t)>& fn, size_t n, int parts, int idx) {
  const size_t begin = n * static_cast<size_t>(idx) / static_cast<size_t>(parts);
  const size_t end = n * static_cast<size_t>(idx + 1) / static_cast<size_t>(parts);
  if (begin < end) fn(begin, end);
}

void ThreadPool::parallel_for(size_t n, const std::function<void(size_t, size_t)>& fn, int max_parts) {
  if (n == 0) return;
  int parts = max_parts > 0 ? std::min(max_parts, n_threads_) : n_threads_;
  parts = static_cast<int>(std::min<size_t>(static_cast<size_t>(parts), n));
  if (parts <= 1) {
    fn(0, n);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    SS_CHECK_MSG(job_ == nullptr, "parallel_for is not re-entrant");
    job_ = &fn;
    job_n_ = n;
    job_parts_ = parts;
    pending_.store(parts - 1);
    generation_.fetch_add(1);
  }
  cv_work_.notify_all();
  run_part(fn, n, parts, 0);
  auto done = [this] { return pending_.load(std::memory_order_acquire) == 0; };
  if (!spin_until(done)) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_done_.wait(lock, done);
  }
  std::lock_guard<std::mutex> lock(mu_);
  job_ = nullptr;
}

void ThreadPool::worker_loop(int index) {
  uint64_t seen = 0;
  for (;;) {
    const std::function<void(size_t, size_t)>* job;
    size_t n;
    int parts;
    auto ready = [&] {
      return stop_.load(std::memory_order_acquire) || generation_.load(std::memory_order_acquire) != seen;
    };
    spin_until(ready);
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_work_.wait(lock, ready);
      if (stop_) return;
      seen = generation_;
      job = job_;
      n = job_n_;
      parts = job_parts_;
    }
    if (index < parts) {
      run_part(*job, n, parts, index);
      if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        std::lock_guard<std::mutex> lock(mu_);  // the caller may be between its check and its wait
        cv_done_.notify_one();
      }
    }
  }
}

}  // namespace ss
