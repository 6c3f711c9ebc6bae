#include "util/thread_pool.h"

#include <algorithm>
#include <chrono>

#include "util/check.h"

namespace ss {

ThreadPool::ThreadPool(int n_threads) : n_threads_(std::max(1, n_threads)) {
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  stop_ = true;
  generation_.fetch_add(1, std::memory_order_release);
  generation_.notify_all();
  for (auto& t : workers_) t.join();
}

namespace {
// Spin at most this long for a job or for the workers to finish, then sleep:
// long enough to bridge the gaps inside a forward pass, short enough that an
// idle pool costs nothing.
constexpr auto kSpin = std::chrono::microseconds(100);

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// Returns once `a` no longer holds `old`: spinning first, then sleeping.
template <class T>
T await_change(const std::atomic<T>& a, T old) {
  const auto deadline = std::chrono::steady_clock::now() + kSpin;
  for (int i = 0;; ++i) {
    const T v = a.load(std::memory_order_acquire);
    if (v != old) return v;
    cpu_relax();
    if ((i & 63) == 63 && std::chrono::steady_clock::now() > deadline) break;
  }
  for (;;) {
    a.wait(old, std::memory_order_acquire);
    const T v = a.load(std::memory_order_acquire);
    if (v != old) return v;
  }
}

void run_part(const std::function<void(size_t, size_t)>& fn, size_t n, int parts, int idx) {
  const size_t begin = n * static_cast<size_t>(idx) / static_cast<size_t>(parts);
  const size_t end = n * static_cast<size_t>(idx + 1) / static_cast<size_t>(parts);
  if (begin < end) fn(begin, end);
}
}  // namespace

void ThreadPool::parallel_for(size_t n, const std::function<void(size_t, size_t)>& fn, int max_parts) {
  if (n == 0) return;
  int parts = max_parts > 0 ? std::min(max_parts, n_threads_) : n_threads_;
  parts = static_cast<int>(std::min<size_t>(static_cast<size_t>(parts), n));
  if (parts <= 1) {
    fn(0, n);
    return;
  }
  SS_CHECK_MSG(!busy_.exchange(true, std::memory_order_acquire), "parallel_for is not re-entrant");
  job_ = &fn;
  job_n_ = n;
  job_parts_ = parts;
  // Every worker checks in, with a part or without: none may still be reading
  // this job's fields when the next job overwrites them.
  pending_.store(n_threads_ - 1, std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_release);
  generation_.notify_all();
  run_part(fn, n, parts, 0);
  for (int left = pending_.load(std::memory_order_acquire); left != 0;) left = await_change(pending_, left);
  busy_.store(false, std::memory_order_release);
}

void ThreadPool::worker_loop(int index) {
  uint32_t seen = 0;
  for (;;) {
    seen = await_change(generation_, seen);
    if (stop_) return;
    if (index < job_parts_) run_part(*job_, job_n_, job_parts_, index);
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) pending_.notify_one();
  }
}

}  // namespace ss
