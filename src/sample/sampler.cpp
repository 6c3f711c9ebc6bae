#include "sample/sampler.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

namespace ss {

Status SamplingParams::validate() const {
  if (!std::isfinite(temperature) || temperature < 0) return make_error("temperature must be >= 0");
  if (!(top_p > 0) || top_p > 1 || !std::isfinite(top_p)) return make_error("top_p must be in (0, 1]");
  if (!(min_p >= 0) || min_p > 1) return make_error("min_p must be in [0, 1]");
  if (!(repeat_penalty > 0) || !std::isfinite(repeat_penalty)) return make_error("repeat_penalty must be > 0");
  if (repeat_last_n < 0) return make_error("repeat_last_n must be >= 0");
  if (!std::isfinite(frequency_penalty) || !std::isfinite(presence_penalty))
    return make_error("frequency and presence penalties must be finite");
  for (const auto& [id, bias] : logit_bias)
    if (id < 0 || !std::isfinite(bias)) return make_error("logit_bias needs ids >= 0 and finite biases");
  return ok_status();
}

int32_t argmax(std::span<const float> logits) {
  int32_t best = 0;
  for (size_t i = 1; i < logits.size(); ++i)
    if (logits[i] > logits[static_cast<size_t>(best)]) best = static_cast<int32_t>(i);
  return best;
}

Sampler::Sampler(const SamplingParams& p) : p_(p), rng_(p.seed) {}

int32_t Sampler::sample(std::span<const float> logits, std::span<const int32_t> history) {
  cands_.resize(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) cands_[i] = {static_cast<int32_t>(i), logits[i]};
  for (const auto& [id, bias] : p_.logit_bias)
    if (static_cast<size_t>(id) < cands_.size()) cands_[static_cast<size_t>(id)].logit += bias;
  const bool penalize = p_.repeat_penalty != 1.0f || p_.frequency_penalty != 0 || p_.presence_penalty != 0;
  if (penalize && p_.repeat_last_n > 0) {
    std::unordered_map<int32_t, int> count;
    const size_t n = std::min(history.size(), static_cast<size_t>(p_.repeat_last_n));
    for (size_t i = history.size() - n; i < history.size(); ++i) ++count[history[i]];
    for (const auto& [id, c] : count) {
      if (id < 0 || static_cast<size_t>(id) >= cands_.size()) continue;
      float& l = cands_[static_cast<size_t>(id)].logit;
      l = l > 0 ? l / p_.repeat_penalty : l * p_.repeat_penalty;
      l -= static_cast<float>(c) * p_.frequency_penalty + p_.presence_penalty;
    }
  }
  if (p_.temperature <= 0) {
    size_t best = 0;
    for (size_t i = 1; i < cands_.size(); ++i)
      if (cands_[i].logit > cands_[best].logit) best = i;
    return cands_[best].id;
  }
  auto by_logit = [](const Cand& a, const Cand& b) { return a.logit > b.logit || (a.logit == b.logit && a.id < b.id); };
  size_t n = cands_.size();
  if (p_.top_k > 0 && static_cast<size_t>(p_.top_k) < n) {
    std::partial_sort(cands_.begin(), cands_.begin() + p_.top_k, cands_.end(), by_logit);
    n = static_cast<size_t>(p_.top_k);
  } else {
    std::sort(cands_.begin(), cands_.end(), by_logit);
  }
  // Probabilities at temperature 1 for the top-p / min-p filters.
  std::vector<double> prob(n);
  const double mx = cands_[0].logit;
  double sum = 0;
  for (size_t i = 0; i < n; ++i) sum += prob[i] = std::exp(static_cast<double>(cands_[i].logit) - mx);
  if (p_.top_p < 1.0f) {
    double cum = 0;
    for (size_t i = 0; i < n; ++i) {
      cum += prob[i] / sum;
      if (cum >= p_.top_p) {
        n = i + 1;
        break;
      }
    }
  }
  if (p_.min_p > 0) {
    const double thr = p_.min_p * prob[0];
    size_t keep = 1;
    while (keep < n && prob[keep] >= thr) ++keep;
    n = keep;
  }
  double z = 0;
  for (size_t i = 0; i < n; ++i) z += prob[i] = std::exp((static_cast<double>(cands_[i].logit) - mx) / p_.temperature);
  std::uniform_real_distribution<double> u(0.0, z);
  double r = u(rng_), acc = 0;
  for (size_t i = 0; i < n; ++i) {
    acc += prob[i];
    if (r < acc) return cands_[i].id;
  }
  return cands_[n - 1].id;
}

}  // namespace ss
