#pragma once
// Token sampling as a chain like llama.cpp's: repetition penalty -> top-k ->
// top-p -> min-p -> temperature -> draw. temperature <= 0 is greedy (argmax,
// lowest id on ties).
#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "util/result.h"

namespace ss {

struct SamplingParams {
  float temperature = 0.8f;
  int top_k = 40;               // <= 0: off
  float top_p = 0.95f;          // >= 1: off
  float min_p = 0.05f;          // <= 0: off
  float repeat_penalty = 1.0f;  // 1: off
  int repeat_last_n = 64;
  uint64_t seed = 0;

  Status validate() const;
};

class Sampler {
 public:
  explicit Sampler(const SamplingParams& p);
  // history: tokens so far (for the repetition penalty).
  int32_t sample(std::span<const float> logits, std::span<const int32_t> history);
  const SamplingParams& params() const { return p_; }

 private:
  struct Cand {
    int32_t id;
    float logit;
  };
  SamplingParams p_;
  std::mt19937_64 rng_;
  std::vector<Cand> cands_;
};

int32_t argmax(std::span<const float> logits);

}  // namespace ss
