#pragma once
// Which tokens survive in a sequence's KV cache (STREAMING.md "Policies").
// Pure arithmetic on text indices: no storage, no positions.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "util/result.h"

namespace ss {

// H2O: S sinks, the R most recent tokens and H heavy hitters per layer and
// KV head, chosen by accumulated attention (docs/H2O.md). Which tokens
// survive then depends on attention, not only on text indices: the
// per-head bookkeeping is kv/h2o_lane.h, and the index functions below
// (visible, resident, first_window_key) describe position-only policies.
enum class PolicyKind { Dense, Window, Sinks, H2O };

struct KvPolicy {
  PolicyKind kind = PolicyKind::Dense;
  int64_t sinks = 0;   // S: first tokens kept for ever
  int64_t window = 0;  // W: most recent tokens kept (0 = unbounded, dense); H2O's R
  int64_t heavy = 0;   // H2O's H: heavy hitters kept per layer and KV head

  // "dense", "window:W", "sinks:S:W", "h2o:S:R:H". `trained_context` gives the defaults
  // "sinks" = sinks:4:(ctx-4), "window" = window:ctx. (recompute:L keeps no
  // cache: it is an evaluation mode, runtime/stream_mode.h.)
  static Result<KvPolicy> parse(std::string_view spec, int64_t trained_context);
  static KvPolicy dense() { return {}; }
  static KvPolicy sinks_window(int64_t s, int64_t w);
  // A sliding-window layer's own policy: a query sees itself and the
  // native_window - 1 keys before it (no sinks).
  static KvPolicy sliding_layer(int64_t native_window) { return {PolicyKind::Window, 0, native_window - 1}; }

  std::string name() const;
  bool bounded() const { return kind != PolicyKind::Dense; }
  bool h2o() const { return kind == PolicyKind::H2O; }
  // Entries the cache holds between steps once full: S + W (+ H).
  int64_t capacity() const { return sinks + window + heavy; }

  // Is key (text index) still in the cache when query (text index) attends?
  // Valid for key <= query.
  bool visible(int64_t key, int64_t query) const {
    if (!bounded()) return true;
    return key < sinks || key >= query - window;
  }
  // Text indices in the cache between steps after n_seen tokens: the sinks,
  // then the window's tail, oldest first. (Dense: all n_seen of them.)
  std::vector<int64_t> resident(int64_t n_seen) const;
  // First window key a query sees (keys below it and >= sinks are evicted).
  int64_t first_window_key(int64_t query) const {
    if (!bounded()) return sinks;
    const int64_t w0 = query - window;
    return w0 > sinks ? w0 : sinks;
  }
};

}  // namespace ss
