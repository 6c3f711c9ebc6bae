#include "sample/logprobs.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "util/check.h"

namespace ss {

TokenLogprob token_logprob(std::span<const float> logits, int32_t chosen, int top_n) {
  SS_CHECK(chosen >= 0 && static_cast<size_t>(chosen) < logits.size());
  double mx = -std::numeric_limits<double>::infinity();
  for (float l : logits) mx = std::max(mx, static_cast<double>(l));
  double sum = 0;
  for (float l : logits) sum += std::exp(static_cast<double>(l) - mx);
  const double log_z = mx + std::log(sum);
  auto lp = [&](int32_t id) {
    return static_cast<float>(static_cast<double>(logits[static_cast<size_t>(id)]) - log_z);
  };

  TokenLogprob out;
  out.id = chosen;
  out.logprob = lp(chosen);
  const size_t n = std::min(static_cast<size_t>(std::max(top_n, 0)), logits.size());
  if (n == 0) return out;
  std::vector<int32_t> ids(logits.size());
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i);
  auto better = [&](int32_t a, int32_t b) {
    const float la = logits[static_cast<size_t>(a)], lb = logits[static_cast<size_t>(b)];
    return la > lb || (la == lb && a < b);
  };
  std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(n), ids.end(), better);
  out.top.reserve(n);
  for (size_t i = 0; i < n; ++i) out.top.emplace_back(ids[i], lp(ids[i]));
  return out;
}

}  // namespace ss
