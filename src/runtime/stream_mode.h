#pragma once
// How a token stream is evaluated: through a KV cache under a policy (kv/),
// or by recompute, an engine mode that keeps no cache between tokens: each
// token is scored by a fresh dense forward over the last L tokens, itself
// included, at positions 0 .. L-1 (STREAMING.md's recompute:L).
#include <cstdint>
#include <string>
#include <string_view>

#include "kv/policy.h"
#include "util/result.h"

namespace ss {

struct StreamMode {
  KvPolicy policy;            // the cache policy (cached mode)
  int64_t recompute_len = 0;  // L > 0: recompute mode

  bool recompute() const { return recompute_len > 0; }
  std::string name() const;
  // Any KvPolicy spec, or "recompute" / "recompute:L" (L defaults to the
  // trained context).
  static Result<StreamMode> parse(std::string_view spec, int64_t trained_context);
  static StreamMode cached(const KvPolicy& p) { return {p, 0}; }
};

}  // namespace ss
