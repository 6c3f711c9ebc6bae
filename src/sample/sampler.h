#pragma once
// Token sampling as a chain like llama.cpp's: logit bias -> penalties
// (repetition, frequency, presence over the last repeat_last_n tokens) ->
// top-k -> top-p -> min-p -> temperature -> draw. temperature <= 0 is greedy
// (argmax after bias and penalties, lowest id on ties).
#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <utility>
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
  // OpenAI's penalties with llama.cpp's reach: a token seen c > 0 times in
  // the last repeat_last_n tokens loses c * frequency + presence (0: off).
  float frequency_penalty = 0;
  float presence_penalty = 0;
  // Added to raw logits before anything else (OpenAI's logit_bias; -100
  // all but bans a token). Ids are checked against the vocabulary by the
  // caller, which knows it; out-of-range ids are ignored here.
  std::vector<std::pair<int32_t, float>> logit_bias;
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
