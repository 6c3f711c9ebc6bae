#include "server/scheduler.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "util/check.h"

namespace ss {

namespace {
using Clock = std::chrono::steady_clock;
}  // namespace

Scheduler::Scheduler(std::shared_ptr<const Model> model, const SchedulerOptions& opts)
    : model_(model), opts_(opts), tokenizer_(model->vocab), engine_(model, [&] {
        EngineOptions eo;
        eo.threads = opts.threads;
        eo.act_quant = opts.act_quant;
        eo.max_chunk = opts.max_chunk;
        eo.sink_logit = opts.sink_logit;
        eo.kv_type = opts.kv_type;
        const int64_t ctx = model->config.trained_context;
        const int per = ::ss::blocks_per_sequence(opts.policy, ctx, eo.block_tokens, eo.max_chunk);
        eo.kv_blocks = opts.kv_blocks > 0 ? opts.kv_blocks : per * std::max(1, opts.max_batch);
        // Admission and spilling count full-pool blocks. A sequence holds no
        // more sliding blocks than full ones while the sliding ring is no
        // longer than the policy's (native window - 1 <= W); a shorter
        // policy window scales the sliding pool by the rings' ratio.
        if (const int w = model->config.sliding_window(); w > 0) {
          const int64_t ring_full = ring_token_count(opts.policy, eo.block_tokens, eo.max_chunk);
          const int64_t ring_swa = ring_token_count(KvPolicy::sliding_layer(w), eo.block_tokens, eo.max_chunk);
          const int64_t factor = ring_full > 0 ? std::max<int64_t>(1, (ring_swa + ring_full - 1) / ring_full) : 1;
          eo.sliding_kv_blocks = static_cast<int>(eo.kv_blocks * factor);
        }
        return eo;
      }()) {
  SS_CHECK_MSG(!opts_.policy.h2o(), "sessions cannot persist h2o's per-head caches (serve refuses the policy)");
  fp_ = fingerprint_of(model->config);
  spill_dir_ = opts_.spill_dir;
  if (opts_.state_dir.empty() && spill_dir_.empty()) {
    std::string tmpl =
        (std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp") + std::string("/sinkstream-spill-XXXXXX");
    if (::mkdtemp(tmpl.data())) {
      spill_dir_ = tmpl;
      own_spill_dir_ = true;
    } else {
      startup_log_.push_back("cannot create a spill directory: idle sessions stay in the KV pool");
    }
  }
  if (!opts_.state_dir.empty()) restore_sessions();
  refresh_pool_metrics();  // correct from the start, not only after the first request
  thread_ = std::thread([this] { loop(); });
}

void Scheduler::wake() { cv_.notify_all(); }

HttpRefusal Scheduler::submit(std::shared_ptr<GenerationRequest> req) {
  for (int32_t t : req->tokens)
    if (t < 0 || t >= model_->config.n_vocab) return HttpError{400, "token id out of range", "prompt"};
  for (const auto& [id, bias] : req->sampling.logit_bias)
    if (id < 0 || id >= model_->config.n_vocab)
      return HttpError{400,
                       "logit_bias token id " + std::to_string(id) + " is not in the vocabulary (0-" +
                           std::to_string(model_->config.n_vocab - 1) + ")",
                       "logit_bias"};
  std::lock_guard<std::mutex> lock(mu_);
  if (stop_) return HttpError{503, "server is shutting down", "", 5};
  if (static_cast<int>(queue_.size()) >= opts_.max_queue) {
    ++metrics_.requests_rejected;
    return HttpError{503, "server at capacity: " + std::to_string(queue_.size()) + " requests waiting", "",
                     retry_after_s()};
  }
  if (!req->session_id.empty()) {
    auto it = sessions_.find(req->session_id);
    if (it == sessions_.end() && static_cast<int>(sessions_.size()) >= opts_.max_sessions) {
      ++metrics_.requests_rejected;
      return HttpError{429,
                       "too many sessions (limit " + std::to_string(opts_.max_sessions) +
                           "); delete one with DELETE /v1/sessions/{id}",
                       "session_id"};
    }
    if (it != sessions_.end() && it->second.info.busy)
      return HttpError{409, "session is busy with another request", "session_id"};
    for (const auto& q : queue_)
      if (q->session_id == req->session_id) return HttpError{409, "session is busy with another request", "session_id"};
  }
  ++metrics_.requests_total;
  queue_.push_back(std::move(req));
  cv_.notify_all();
  return std::nullopt;
}

int Scheduler::cancel_all() {
  return run_on_loop<int>([this] {
    int n = 0;
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& q : queue_) q->cancelled = true, ++n;
    for (auto& a : active_) a.req->cancelled = true, ++n;
    return n;
  });
}

void Scheduler::loop() {
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !queue_.empty() || !commands_.empty() || !active_.empty(); });
      if (stop_) return;
    }
    run_commands();
    admit();
    if (!active_.empty()) step();
    std::unique_lock<std::mutex> lock(mu_);
    metrics_.active = static_cast<int64_t>(active_.size());
    refresh_pool_metrics();
    // Requests wait but nothing runs (no idle session could be spilled, e.g.
    // the disk is full): retry shortly instead of spinning.
    if (active_.empty() && !queue_.empty() && commands_.empty() && !stop_)
      cv_.wait_for(lock, std::chrono::milliseconds(50));
  }
}

void Scheduler::run_commands() {
  std::deque<std::function<void()>> cmds;
  {
    std::lock_guard<std::mutex> lock(mu_);
    cmds.swap(commands_);
  }
  for (auto& c : cmds) c();
}

void Scheduler::try_share_sinks(Active& a) {
  const int64_t S = opts_.policy.sinks;
  if (S <= 0 || !opts_.policy.bounded() || !a.from_start || static_cast<int64_t>(a.feed.size()) <= S) return;
  if (a.req->score_prompt) return;  // adopted sinks skip their tokens' logits, which a scored prompt needs
  const SequenceKv* seq = engine_.sequence(a.seq);
  if (!seq || seq->n_seen() != 0) return;
  const auto* blocks = sinks_.find(seq->policy().name(), std::span<const int32_t>(a.feed).first(S));
  if (!blocks || !engine_.adopt_sinks(a.seq, *blocks).ok()) return;
  a.fed = static_cast<size_t>(S);
  if (a.session) a.session->shared_sinks = true;
}

void Scheduler::register_sinks(Active& a) {
  const int64_t S = opts_.policy.sinks;
  // The key must be the sequence's own first S tokens: only a feed that
  // started the sequence holds them (a later turn's feed starts mid-text).
  if (S <= 0 || !opts_.policy.bounded() || !a.from_start || a.fed < static_cast<size_t>(S)) return;
  const SequenceKv* seq = engine_.sequence(a.seq);
  if (!seq || seq->n_seen() < S) return;
  sinks_.add(engine_.pool(), seq->policy().name(), std::span<const int32_t>(a.feed).first(S), seq->sink_blocks());
}

void Scheduler::admit() {
  std::deque<std::shared_ptr<GenerationRequest>> waiting;
  {
    std::lock_guard<std::mutex> lock(mu_);
    waiting.swap(queue_);
  }
  std::deque<std::shared_ptr<GenerationRequest>> keep;
  for (auto& req : waiting) {
    // First come, first served: once one waits for room, later ones wait too.
    if (!keep.empty() || static_cast<int>(active_.size()) >= opts_.max_batch) {
      keep.push_back(req);
      continue;
    }
    admit_one(req, keep);
  }
  if (!keep.empty()) {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = keep.rbegin(); it != keep.rend(); ++it) queue_.push_front(*it);
  }
}

void Scheduler::admit_one(const std::shared_ptr<GenerationRequest>& req,
                          std::deque<std::shared_ptr<GenerationRequest>>& keep) {
  Active a;
  a.req = req;
  a.started = Clock::now();
  if (req->cancelled) {
    finish(a, "cancelled");
    return;
  }
  Session* s = nullptr;
  if (!req->session_id.empty())
    if (auto it = sessions_.find(req->session_id); it != sessions_.end()) s = &it->second;
  const int per = blocks_per_sequence();
  const int total = engine_.pool().total_blocks();
  if (per > total) {
    finish(a, "error",
           "KV pool too small for one sequence (" + std::to_string(per) + " blocks needed, " + std::to_string(total) +
               " in the pool)",
           503);
    return;
  }
  // Every active request may grow to a full sequence: join only if that fits.
  if ((static_cast<int>(active_.size()) + 1) * per > total) {
    keep.push_back(req);
    return;
  }
  const SequenceKv* resident = s && s->seq >= 0 ? engine_.sequence(s->seq) : nullptr;
  if (s) s->busy = true;  // not a spill candidate while it is being admitted
  const bool room = make_room(blocks_promised(per - (resident ? resident->blocks_held() : 0)));
  if (s) s->busy = false;
  if (!room) {
    keep.push_back(req);
    return;
  }
  if (s && s->seq < 0) {
    if (auto st = unspill(req->session_id, *s); !st.ok()) {
      // Its file is gone or corrupt: the conversation cannot continue. The
      // session is dropped so the client can start it again.
      std::fprintf(stderr, "[sinkstream] session %s: %s\n", req->session_id.c_str(), st.error().message.c_str());
      {
        std::lock_guard<std::mutex> lock(mu_);
        ++metrics_.session_files_rejected;
        sessions_.erase(req->session_id);
      }
      finish(a, "error", "session '" + req->session_id + "' could not be restored: " + st.error().message, 500);
      return;
    }
  }
  if (!s) {
    auto id = engine_.create_sequence(opts_.policy);
    if (!id.ok()) {
      finish(a, "error", id.error().message, 500);
      return;
    }
    a.seq = id.value();
    if (!req->session_id.empty()) {
      std::lock_guard<std::mutex> lock(mu_);
      Session ns;
      ns.seq = a.seq;
      s = &(sessions_[req->session_id] = std::move(ns));
    }
  } else {
    a.seq = s->seq;
  }
  a.session = s;
  if (s) {
    a.feed = s->pending;
    s->pending.clear();
    s->last_used = ++lru_clock_;
    std::lock_guard<std::mutex> lock(mu_);
    s->busy = true;
    s->info.busy = true;
    s->info.resident = true;
  }
  a.feed.insert(a.feed.end(), req->tokens.begin(), req->tokens.end());
  const SequenceKv* seq = engine_.sequence(a.seq);
  a.from_start = seq && seq->n_seen() == 0;
  if (a.feed.empty()) {
    if (a.from_start && model_->vocab.bos >= 0) {
      a.feed.push_back(model_->vocab.bos);
    } else {
      finish(a, "error", "empty prompt", 400);
      return;
    }
  }
  req->prompt_tokens = static_cast<int64_t>(a.feed.size());
  a.prompt_begin = a.feed.size() - std::min(a.feed.size(), req->tokens.size());
  if (req->score_prompt && a.prompt_begin == 0) {
    TokenLogprob first;  // nothing in this sequence precedes it
    first.id = a.feed[0];
    first.scored = false;
    std::lock_guard<std::mutex> lk(req->mu);
    req->pending_logprobs.push_back(first);
  }
  a.sampler.emplace(req->sampling);
  if (req->shape_plan) {
    a.shape.emplace(*req->shape_plan);
    if (!constraint_vocab_) constraint_vocab_ = ConstraintVocab::of(*model_, tokenizer_);
  } else if (req->json_schema || req->grammar) {
    a.shape.emplace(req->json_schema, req->grammar);
    if (!constraint_vocab_) constraint_vocab_ = ConstraintVocab::of(*model_, tokenizer_);
  }
  a.detok.emplace(tokenizer_, req->answer_starts_text);
  a.out.emplace(req->stop);
  a.history.assign(a.feed.end() - std::min<ptrdiff_t>(static_cast<ptrdiff_t>(a.feed.size()), kMaxPenaltyWindow),
                   a.feed.end());
  try_share_sinks(a);
  {
    std::lock_guard<std::mutex> lk(a.req->mu);
    a.req->admitted = true;
  }
  a.req->notify();
  active_.push_back(std::move(a));
}

void Scheduler::finish(Active& a, const std::string& reason, const std::string& error, int status) {
  if (a.detok && a.out && reason != "error") a.out->push(a.detok->flush());
  const std::string tail = a.out && reason != "error" ? a.out->finish() : std::string();
  // Session bookkeeping and the durable write happen before the client hears
  // the turn is over, so its next request finds the session idle and saved.
  if (a.session) {
    Session& s = *a.session;
    if (a.last >= 0) s.pending = {model_->vocab.as_context(a.last)};
    s.busy = false;
    s.turns += 1;
    s.tokens_in += a.req->prompt_tokens;
    s.tokens_out += a.req->completion_tokens;
    s.last_used = ++lru_clock_;
    s.file_current = false;
    if (!a.req->idempotency_key.empty() && reason != "error" && reason != "cancelled") {
      s.last_key = a.req->idempotency_key;
      s.last_reply = a.reply + tail;
    }
    if (auto st = persist(a.req->session_id, s); !st.ok()) {
      std::lock_guard<std::mutex> lk(a.req->mu);
      a.req->persist_error = "session '" + a.req->session_id + "' was not saved: " + st.error().message;
    }
    a.req->lease.reset();  // saved: the next turn may run on any replica
    std::lock_guard<std::mutex> lock(mu_);
    refresh_info(a.req->session_id, s);
  } else if (a.seq >= 0) {
    engine_.free_sequence(a.seq);
  }
  a.seq = -1;
  if (a.req->admitted) {
    const double secs = std::chrono::duration<double>(Clock::now() - a.started).count();
    std::lock_guard<std::mutex> lock(mu_);
    mean_request_s_ = 0.8 * mean_request_s_ + 0.2 * secs;
  }
  {
    std::lock_guard<std::mutex> lk(a.req->mu);
    a.req->pending_text += tail;
    a.req->finished = true;
    a.req->finish_reason = reason;
    a.req->error = error;
    a.req->error_status = status;
  }
  a.req->notify();
  // After the reply, so the hour's directory scan never delays a turn.
  if (a.session && !opts_.state_dir.empty()) sweep_stale_saves(/*at_start=*/false);
  sinks_.prune(engine_.pool());
  if (reason == "cancelled") {
    std::lock_guard<std::mutex> lock(mu_);
    ++metrics_.cancelled;
  }
}

size_t Scheduler::vocab_size() const { return static_cast<size_t>(model_->config.n_vocab); }

void Scheduler::score_prompt_rows(Active& a, std::span<const float> rows, size_t n) {
  const size_t v = vocab_size();
  std::vector<TokenLogprob> scored;
  for (size_t r = 0; r < n; ++r) {
    const size_t next = a.fed + r + 1;  // row r (feed index fed + r) predicts feed[next]
    if (next < a.prompt_begin || next >= a.feed.size()) continue;
    scored.push_back(token_logprob(rows.subspan(r * v, v), a.feed[next], a.req->logprobs));
  }
  std::lock_guard<std::mutex> lk(a.req->mu);
  for (auto& s : scored) a.req->pending_logprobs.push_back(std::move(s));
}

void Scheduler::step() {
  // Cancelled requests (client gone) leave first, freeing their blocks.
  for (auto& a : active_)
    if (a.req->cancelled && !a.req->finished) finish(a, "cancelled");
  active_.erase(std::remove_if(active_.begin(), active_.end(), [](const Active& a) { return a.req->finished; }),
                active_.end());
  if (active_.empty()) return;

  std::vector<BatchItem> items;
  std::vector<int> chunk(active_.size(), 0);
  for (size_t i = 0; i < active_.size(); ++i) {
    Active& a = active_[i];
    if (!a.decoding) {
      size_t n = std::min<size_t>(a.feed.size() - a.fed, static_cast<size_t>(opts_.max_chunk));
      // Scored prompts need every row's logits: at most 4M floats a chunk.
      if (a.req->score_prompt) n = std::min(n, std::max<size_t>(1, (size_t{1} << 22) / vocab_size()));
      chunk[i] = static_cast<int>(n);
      items.push_back({a.seq, std::span<const int32_t>(a.feed).subspan(a.fed, n), a.req->score_prompt});
    } else {
      items.push_back({a.seq, std::span<const int32_t>(&a.last, 1), false});
    }
  }
  std::vector<std::vector<float>> logits;
  const auto t0 = Clock::now();
  const Status st = engine_.forward(items, logits);
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  if (!st.ok()) {
    // Admission reserves a full sequence per active request, so this is not
    // expected; if it happens, the newest request gives way and the others
    // run again next step (the engine checks before it changes any state).
    std::fprintf(stderr, "[sinkstream] step failed, preempting the newest request: %s\n", st.error().message.c_str());
    finish(active_.back(), "error", "preempted: " + st.error().message, 503);
    active_.pop_back();
    std::lock_guard<std::mutex> lock(mu_);
    ++metrics_.preempted;
    return;
  }
  int64_t decoded = 0, prefilled = 0;
  for (size_t i = 0; i < active_.size(); ++i) {
    Active& a = active_[i];
    std::span<const float> next = logits[i];  // the logits that pick the next token
    if (items[i].all_logits) {
      score_prompt_rows(a, logits[i], static_cast<size_t>(chunk[i]));
      next = next.last(vocab_size());
    }
    if (!a.decoding) {
      a.fed += static_cast<size_t>(chunk[i]);
      prefilled += chunk[i];
      register_sinks(a);
      if (a.fed < a.feed.size()) continue;
      a.decoding = true;
    } else {
      ++decoded;
    }
    GenerationRequest& r = *a.req;
    if (r.max_tokens == 0) {
      finish(a, "length");
      continue;
    }
    int32_t tok = -1;
    if (a.shape) {  // structured output: only tokens that keep the answer a prefix of one the shape accepts
      tok = sample_shaped(
          *a.shape, *constraint_vocab_, next, masked_, !r.ignore_eos,
          [&](std::span<const float> l) { return a.sampler->sample(l, a.history); },
          [&](int32_t t) { return model_->vocab.is_eog(t); });
      if (tok < 0) {
        finish(a, "stop");
        continue;
      }
    } else {
      tok = a.sampler->sample(next, a.history);
    }
    a.last = tok;
    a.history.push_back(tok);
    if (a.history.size() > 2 * kMaxPenaltyWindow)
      a.history.erase(a.history.begin(), a.history.begin() + kMaxPenaltyWindow);
    {
      std::lock_guard<std::mutex> lk(r.mu);
      ++r.completion_tokens;
    }
    if (!r.ignore_eos && model_->vocab.is_eog(tok)) {
      finish(a, "stop");
      continue;
    }
    if (r.logprobs >= 0) {
      TokenLogprob lp = token_logprob(next, tok, r.logprobs);
      std::lock_guard<std::mutex> lk(r.mu);
      r.pending_logprobs.push_back(std::move(lp));
    }
    if (a.out->push(a.detok->push(tok))) {
      a.detok.reset();  // text after the stop string is dropped
      finish(a, "stop");
      continue;
    }
    if (a.shape && a.shape->complete()) {
      finish(a, "stop");
      continue;
    }
    if (r.max_tokens > 0 && r.completion_tokens >= r.max_tokens) {
      finish(a, "length");
      continue;
    }
    if (std::string ready = a.out->take(); !ready.empty()) {
      if (!r.idempotency_key.empty()) a.reply += ready;
      {
        std::lock_guard<std::mutex> lk(r.mu);
        r.pending_text += ready;
      }
      r.notify();
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    metrics_.tokens_in += prefilled;
    metrics_.tokens_out += decoded;
    metrics_.batch_size.observe(static_cast<double>(items.size()));
    if (decoded > 0) metrics_.token_latency_ms.observe(ms, decoded);
    for (auto& a : active_)
      if (a.session && !a.req->finished) refresh_info(a.req->session_id, *a.session);
  }
  active_.erase(std::remove_if(active_.begin(), active_.end(), [](const Active& a) { return a.req->finished; }),
                active_.end());
}

}  // namespace ss
