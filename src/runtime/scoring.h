#pragma once
// Per-token negative log-likelihood of a token stream under a KV policy,
// fed exactly as STREAMING.md's evaluation does.
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "kv/policy.h"
#include "runtime/engine.h"
#include "runtime/stream_mode.h"
#include "util/result.h"

namespace ss {

// Called after each scored chunk with (tokens scored so far, total, sum of
// their NLLs).
using ScoreProgress = std::function<void(int64_t done, int64_t total, double nll_sum)>;

// nll[i] = -ln p(tokens[i+1] | stream up to i), i = 0 .. N-2.
Result<std::vector<double>> score_tokens(Engine& engine, std::span<const int32_t> tokens, const StreamMode& mode,
                                         const ScoreProgress& progress = {});

// Logits for the last token of a fresh dense forward over `window` (the
// recompute baseline): positions 0 .. window.size()-1.
Result<std::vector<float>> recompute_logits(Engine& engine, std::span<const int32_t> window);

}  // namespace ss
