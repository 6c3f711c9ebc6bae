#include "util/thread_pool.h"

#include <algorithm>
#include <chrono>

#include "util/check.h"

namespace ss {

ThreadPool::ThreadPool(int n_threads) : n_threads_(std::max(1, n_threads)), claims_(static_cast<size_t>(n_threads_)) {
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

bool ThreadPool::claim(int part, uint32_t gen) {
  uint32_t prev = gen - 1;
  return claims_[static_cast<size_t>(part)].gen.compare_exchange_strong(prev, gen, std::memory_order_acq_rel,
                                                                        std::memory_order_relaxed);
}

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
  done_.store(0, std::memory_order_relaxed);
  const uint32_t gen = generation_.load(std::memory_order_relaxed) + 1;
  // Workers without a range this time find theirs already claimed.
  for (int p = parts; p < n_threads_; ++p) SS_CHECK(claim(p, gen));
  generation_.store(gen, std::memory_order_release);
  generation_.notify_all();
  run_part(fn, n, parts, 0);
  // The ranges whose workers have not started yet: run here.
  int running = 0;
  for (int p = 1; p < parts; ++p) {
    if (claim(p, gen))
      run_part(fn, n, parts, p);
    else
      ++running;
  }
  for (int d = done_.load(std::memory_order_acquire); d != running;) d = await_change(done_, d);
  busy_.store(false, std::memory_order_release);
}

void ThreadPool::worker_loop(int index) {
  uint32_t seen = 0;
  for (;;) {
    seen = await_change(generation_, seen);
    if (stop_) return;
    // Fails when the caller took this range (it ran out of its own work
    // first) or the job is over: then nothing of the job is read.
    if (!claim(index, seen)) continue;
    run_part(*job_, job_n_, job_parts_, index);
    done_.fetch_add(1, std::memory_order_release);
    done_.notify_one();
  }
}

}  // namespace ss
