#pragma once
// One generation request and its output channel between the scheduler thread
// (producer) and the HTTP side (consumer). The HTTP side either blocks on
// take()/wait_admitted() or registers on_update, which the scheduler calls
// (with no lock held) after every change: admitted, text, finished.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "sample/constraint.h"
#include "sample/gbnf.h"
#include "sample/json_schema.h"
#include "sample/logprobs.h"
#include "sample/sampler.h"

namespace ss {

// The sampling penalties look back at most this many tokens (repeat_last_n):
// the scheduler keeps that much of each request's history.
inline constexpr int kMaxPenaltyWindow = 256;

struct GenerationRequest {
  std::vector<int32_t> tokens;  // new tokens to prefill
  SamplingParams sampling;
  int64_t max_tokens = -1;  // -1: until EOS or a stop string
  std::vector<std::string> stop;
  bool ignore_eos = false;
  int logprobs = -1;  // -1: none; else each token's log-probability and this many alternatives
  // A chat answer, or a completion of an empty first prompt, starts a text:
  // SentencePiece's word-start space before its first word is not shown.
  // A completion continues its prompt, so that space is part of its text.
  bool answer_starts_text = true;
  // echo with logprobs: every prompt token gets an entry (given the tokens
  // before it) ahead of the answer's.
  bool score_prompt = false;
  // Structured output: only tokens that keep the answer a prefix of a JSON
  // text this schema accepts are sampled, and the answer ends when the
  // value closes (or, a top-level number, at end-of-generation). Null: free text.
  std::shared_ptr<const JsonSchema> json_schema;
  std::shared_ptr<const Gbnf> grammar;  // or a GBNF grammar (at most one of the two)
  // Or a lead and what may follow it (gpt-oss: its reasoning and header,
  // then the schema or grammar, or a tool's arguments); it takes the place
  // of the two above where set.
  std::shared_ptr<const ShapePlan> shape_plan;
  std::string session_id;  // empty: a one-off sequence
  // Held for the turn when replicas share the state directory
  // (server/session_lease.h); released once the turn is saved.
  std::shared_ptr<void> lease;
  // Idempotency-Key: saved with the session's turn, so a retry of a turn
  // that was saved but whose reply was lost gets that reply (Scheduler::replay).
  std::string idempotency_key;
  // Set before submit; called from the scheduler thread.
  std::function<void()> on_update;

  // Output, guarded by mu.
  std::mutex mu;
  std::condition_variable cv;
  std::string pending_text;  // produced, not yet taken by the HTTP side
  // With logprobs: one entry per generated token (end-of-generation tokens
  // excluded), not yet taken; the HTTP side takes them with the text.
  std::vector<TokenLogprob> pending_logprobs;
  bool finished = false;
  std::string finish_reason;  // stop | length | cancelled | error
  std::string error;
  int error_status = 0;
  std::string persist_error;  // the turn was served but its session could not be saved
  bool admitted = false;      // joined the running batch (streams start only then)
  int64_t prompt_tokens = 0, completion_tokens = 0;
  std::atomic<bool> cancelled{false};

  // Waits until text is available or the request finished; returns the text.
  std::string take(bool& done, std::chrono::milliseconds timeout);
  // Non-blocking: the text so far and whether the request finished.
  std::string poll(bool& done);
  // Waits until the request runs or has finished (e.g. refused); true if it runs.
  bool wait_admitted();
  // Wakes waiters and calls on_update (mu must not be held).
  void notify();
};

}  // namespace ss
