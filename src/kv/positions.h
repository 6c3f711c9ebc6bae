#pragma once
// Which position RoPE sees (STREAMING.md "positions in the cache").
//
// Entry j of the cache has position j. For a query at text index t the cache
// holds the sinks (text = cache position) and a window that starts `offset`
// text positions later than its cache position, so
//   cache_position(key) = key            for key <  S
//                        = key - offset  for window keys
//   query_position      = t - offset
// with offset = max(0, t - W - S) (H2O: t - capacity; its heavy hitters sit
// between sinks and window and are positioned by rank, docs/H2O.md).
// Keys are stored rotated at their text index:
// a window key and the query rotated at text positions have the same distance
// as at cache positions; sinks are scored with the query rotated at its cache
// position. No stored key is ever re-rotated.
#include <cstdint>

#include "kv/policy.h"

namespace ss {

inline int64_t position_offset(const KvPolicy& p, int64_t query) {
  if (!p.bounded()) return 0;
  const int64_t off = query - p.capacity();
  return off > 0 ? off : 0;
}

inline int64_t cache_position(const KvPolicy& p, int64_t key, int64_t query) {
  return key < p.sinks ? key : key - position_offset(p, query);
}

inline int64_t query_cache_position(const KvPolicy& p, int64_t query) { return query - position_offset(p, query); }

}  // namespace ss
