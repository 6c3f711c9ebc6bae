#pragma once
// What the scheduler counts, as plain data (rendered for Prometheus by
// metrics_text.h) and what a session looks like from outside.
#include <cstdint>
#include <string>
#include <vector>

namespace ss {

struct SessionInfo {
  std::string id;
  int64_t tokens_seen = 0;
  int64_t sinks = 0, window = 0;  // entries in the cache now
  int64_t capacity_sinks = 0, capacity_window = 0;
  int64_t evicted = 0;
  int64_t turns = 0, tokens_in = 0, tokens_out = 0;
  bool busy = false;
  bool shared_sinks = false;
  bool resident = false;  // its KV is in the pool (else on disk, restored on its next turn)
};

// A cumulative histogram with fixed upper bounds (Prometheus style).
struct Histogram {
  std::vector<double> bounds;   // upper bounds, ascending
  std::vector<int64_t> counts;  // cumulative per bound
  double sum = 0;
  int64_t count = 0;
  explicit Histogram(std::vector<double> b = {}) : bounds(std::move(b)), counts(bounds.size(), 0) {}
  void observe(double v, int64_t n = 1) {
    for (size_t i = 0; i < bounds.size(); ++i)
      if (v <= bounds[i]) counts[i] += n;
    sum += v * static_cast<double>(n);
    count += n;
  }
};

struct SchedulerMetrics {
  int64_t requests_total = 0, requests_rejected = 0, tokens_in = 0, tokens_out = 0;
  int64_t active = 0, queued = 0, sessions = 0;
  int64_t sessions_resident = 0, sessions_spilled = 0;  // gauges: KV in the pool / on disk
  int64_t session_spills = 0, session_restores = 0;     // counters
  int64_t kv_blocks_used = 0, kv_blocks_total = 0, kv_blocks_shared = 0;
  int64_t preempted = 0;
  int64_t cancelled = 0;  // requests that ended because their client left (or on shutdown)  // requests failed because
                          // a step could not get blocks
  Histogram token_latency_ms{{0.5, 1, 2, 5, 10, 20, 50, 100, 250, 1000}};
  Histogram batch_size{{1, 2, 4, 8, 16, 32, 64, 128, 256}};
  int64_t persist_errors = 0;
  int64_t store_reloads = 0;            // sessions read from the shared store because another replica moved them on
  int64_t session_fallbacks = 0;        // sessions restored from .bak (newest file bad)
  int64_t session_files_rejected = 0;   // sessions that could not be restored at all
  int64_t session_files_discarded = 0;  // corrupt newest files dropped on save instead of kept as .bak
};

}  // namespace ss
