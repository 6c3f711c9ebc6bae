#pragma once
// Log-probabilities a client asks for (OpenAI's logprobs / top_logprobs):
// log-softmax of the model's raw logits, before logit bias, penalties,
// temperature and filters, as vLLM and llama.cpp's server report them by
// default, so they score the model, not the sampling settings.
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace ss {

struct TokenLogprob {
  int32_t id = -1;
  bool scored = true;  // false: a sequence's first token, which nothing predicts (logprob null)
  float logprob = 0;
  std::vector<std::pair<int32_t, float>> top;  // the top_n most likely ids, best first (ties: lower id)
};

// logits: [n_vocab]; chosen in range; top_n >= 0 (capped at n_vocab).
TokenLogprob token_logprob(std::span<const float> logits, int32_t chosen, int top_n);

}  // namespace ss
