#include "server/scheduler.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "util/check.h"

namespace ss {

namespace {
using Clock = std::chrono::steady_clock;

Error status_error(int status, const std::string& msg) { return make_error(std::to_string(status) + ": " + msg); }
}  // namespace

int status_of(const Error& e) {
  if (e.message.size() > 4 && e.message[3] == ':' && std::isdigit(static_cast<unsigned char>(e.message[0])))
    return std::stoi(e.message.substr(0, 3));
  return 500;
}

std::string GenerationRequest::take(bool& done, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu);
  cv.wait_for(lock, timeout, [&] { return !pending_text.empty() || finished; });
  std::string out;
  out.swap(pending_text);
  done = finished;
  return out;
}

bool GenerationRequest::wait_admitted() {
  std::unique_lock<std::mutex> lock(mu);
  cv.wait(lock, [&] { return admitted || finished; });
  return admitted;
}

Scheduler::Scheduler(std::shared_ptr<const Model> model, const SchedulerOptions& opts)
    : model_(model), opts_(opts), tokenizer_(model->vocab), engine_(model, [&] {
        EngineOptions eo;
        eo.threads = opts.threads;
        eo.act_quant = opts.act_quant;
        eo.max_chunk = opts.max_chunk;
        const int per = blocks_needed(opts.policy.bounded() ? opts.policy : KvPolicy::dense(),
                                      model->config.trained_context, eo.block_tokens, eo.max_chunk);
        eo.kv_blocks = opts.kv_blocks > 0 ? opts.kv_blocks : per * 64;
        return eo;
      }()) {
  fp_ = {model->config.n_layers, model->config.kv_dim(), model->config.n_vocab};
  metrics_.latency_buckets_ms = {0.5, 1, 2, 5, 10, 20, 50, 100, 250, 1000};
  metrics_.latency_counts.assign(metrics_.latency_buckets_ms.size(), 0);
  if (!opts_.state_dir.empty()) restore_sessions();
  refresh_pool_metrics();  // correct from the start, not only after the first request
  thread_ = std::thread([this] { loop(); });
}

Scheduler::~Scheduler() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
  for (auto& a : active_) finish(a, "cancelled");
}

void Scheduler::wake() { cv_.notify_all(); }

int Scheduler::blocks_per_sequence() const {
  const KvPolicy p = opts_.policy.bounded() ? opts_.policy : KvPolicy::dense();
  return blocks_needed(p, model_->config.trained_context, engine_.options().block_tokens, engine_.options().max_chunk);
}

Status Scheduler::submit(std::shared_ptr<GenerationRequest> req) {
  for (int32_t t : req->tokens)
    if (t < 0 || t >= model_->config.n_vocab) return status_error(400, "token id out of range");
  std::lock_guard<std::mutex> lock(mu_);
  if (static_cast<int>(queue_.size()) >= opts_.max_queue) {
    ++metrics_.requests_rejected;
    return status_error(429, "server busy: request queue is full");
  }
  if (!req->session_id.empty()) {
    auto it = sessions_.find(req->session_id);
    if (it == sessions_.end() && static_cast<int>(sessions_.size()) >= opts_.max_sessions) {
      ++metrics_.requests_rejected;
      return status_error(429, "too many sessions (limit " + std::to_string(opts_.max_sessions) + ")");
    }
    if (it != sessions_.end() && it->second.info.busy) return status_error(409, "session is busy with another request");
    for (const auto& q : queue_)
      if (q->session_id == req->session_id) return status_error(409, "session is busy with another request");
  }
  ++metrics_.requests_total;
  queue_.push_back(std::move(req));
  cv_.notify_all();
  return ok_status();
}

template <typename T>
T Scheduler::run_on_loop(std::function<T()> fn) {
  auto p = std::make_shared<std::promise<T>>();
  auto f = p->get_future();
  {
    std::lock_guard<std::mutex> lock(mu_);
    commands_.push_back([fn, p] { p->set_value(fn()); });
  }
  cv_.notify_all();
  return f.get();
}

std::optional<SessionInfo> Scheduler::session(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = sessions_.find(id);
  if (it == sessions_.end()) return std::nullopt;
  return it->second.info;
}

bool Scheduler::session_exists(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  return sessions_.count(id) != 0;
}

std::vector<SessionInfo> Scheduler::sessions() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<SessionInfo> out;
  for (const auto& [id, s] : sessions_) out.push_back(s.info);
  return out;
}

bool Scheduler::delete_session(const std::string& id) {
  return run_on_loop<bool>([this, id] {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = sessions_.find(id);
    if (it == sessions_.end()) return false;
    for (auto& a : active_)
      if (a.session == &it->second) a.req->cancelled = true, a.session = nullptr, a.seq = -1;
    engine_.free_sequence(it->second.seq);
    sessions_.erase(it);
    prune_sink_registry();  // its sink blocks, if registered, go back to the pool now
    refresh_pool_metrics();
    if (!opts_.state_dir.empty()) (void)remove_session(opts_.state_dir, id);
    return true;
  });
}

SchedulerMetrics Scheduler::metrics() {
  std::lock_guard<std::mutex> lock(mu_);
  SchedulerMetrics m = metrics_;
  m.queued = static_cast<int64_t>(queue_.size());
  m.sessions = static_cast<int64_t>(sessions_.size());
  return m;
}

void Scheduler::refresh_info(const std::string& id, Session& s) {
  const SequenceKv* seq = engine_.sequence(s.seq);
  SessionInfo& i = s.info;
  i.id = id;
  i.turns = s.turns;
  i.tokens_in = s.tokens_in;
  i.tokens_out = s.tokens_out;
  i.busy = s.busy;
  i.shared_sinks = s.shared_sinks;
  if (seq) {
    const auto& p = seq->policy();
    i.tokens_seen = seq->n_seen();
    i.sinks = std::min(p.sinks, seq->n_seen());
    i.window = seq->cached_entries() - i.sinks;
    i.capacity_sinks = p.sinks;
    i.capacity_window = p.bounded() ? p.window : -1;
    i.evicted = seq->n_seen() - seq->cached_entries();
  }
}

Status Scheduler::persist(const std::string& id, Session& s) {
  if (opts_.state_dir.empty()) return ok_status();
  SessionRecord r;
  r.id = id;
  r.state = engine_.export_sequence(s.seq);
  r.pending = s.pending;
  r.turns = s.turns;
  r.tokens_in = s.tokens_in;
  r.tokens_out = s.tokens_out;
  std::string note;
  const Status st = save_session(opts_.state_dir, r, fp_, &note);
  if (!note.empty()) {
    std::fprintf(stderr, "[sinkstream] session %s: %s\n", id.c_str(), note.c_str());
    std::lock_guard<std::mutex> lock(mu_);
    ++metrics_.session_files_discarded;
  }
  if (!st.ok()) {
    std::fprintf(stderr, "[sinkstream] cannot persist session %s: %s (serving continues)\n", id.c_str(),
                 st.error().message.c_str());
    std::lock_guard<std::mutex> lock(mu_);
    ++metrics_.persist_errors;
    return st;
  }
  return ok_status();
}

void Scheduler::restore_sessions() {
  auto records = load_all_sessions(opts_.state_dir, fp_, startup_log_, &metrics_.session_fallbacks,
                                   &metrics_.session_files_rejected);
  for (auto& r : records) {
    if (r.state.policy.name() != opts_.policy.name()) {
      startup_log_.push_back("session " + r.id + " was saved with policy " + r.state.policy.name() +
                             "; restored with it");
    }
    auto id = engine_.import_sequence(r.state);
    if (!id.ok()) {
      startup_log_.push_back("session " + r.id + ": " + id.error().message);
      continue;
    }
    Session s;
    s.seq = id.value();
    s.pending = r.pending;
    s.turns = r.turns;
    s.tokens_in = r.tokens_in;
    s.tokens_out = r.tokens_out;
    auto& ref = sessions_[r.id] = std::move(s);
    refresh_info(r.id, ref);
    startup_log_.push_back("restored session " + r.id + " (" + std::to_string(ref.info.tokens_seen) + " tokens seen)");
  }
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
    std::lock_guard<std::mutex> lock(mu_);
    metrics_.active = static_cast<int64_t>(active_.size());
    refresh_pool_metrics();
  }
}

void Scheduler::refresh_pool_metrics() {
  metrics_.kv_blocks_used = engine_.pool().used_blocks();
  metrics_.kv_blocks_total = engine_.pool().total_blocks();
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
  if (S <= 0 || !opts_.policy.bounded()) return;
  const SequenceKv* seq = engine_.sequence(a.seq);
  if (!seq || seq->n_seen() != 0 || static_cast<int64_t>(a.feed.size()) <= S) return;
  const std::vector<int32_t> key(a.feed.begin(), a.feed.begin() + S);
  auto it = sink_registry_.find(key);
  if (it == sink_registry_.end()) return;
  if (!engine_.adopt_sinks(a.seq, it->second).ok()) return;
  a.fed = static_cast<size_t>(S);
  if (a.session) a.session->shared_sinks = true;
}

void Scheduler::register_sinks(Active& a) {
  const int64_t S = opts_.policy.sinks;
  // The key must be the sequence's own first S tokens: only a feed that
  // started the sequence holds them (a later turn's feed starts mid-text).
  if (S <= 0 || !opts_.policy.bounded() || !a.from_start || a.fed < static_cast<size_t>(S)) return;
  const std::vector<int32_t> key(a.feed.begin(), a.feed.begin() + S);
  if (sink_registry_.count(key)) return;
  const SequenceKv* seq = engine_.sequence(a.seq);
  if (!seq || seq->n_seen() < S) return;
  auto blocks = seq->sink_blocks();
  for (BlockId b : blocks) engine_.pool().retain(b);
  sink_registry_[key] = blocks;
}

void Scheduler::admit() {
  std::deque<std::shared_ptr<GenerationRequest>> waiting;
  {
    std::lock_guard<std::mutex> lock(mu_);
    waiting.swap(queue_);
  }
  const int per = blocks_per_sequence();
  std::deque<std::shared_ptr<GenerationRequest>> keep;
  for (auto& req : waiting) {
    if (static_cast<int>(active_.size()) >= opts_.max_batch) {
      keep.push_back(req);
      continue;
    }
    if (req->cancelled) {
      std::lock_guard<std::mutex> lk(req->mu);
      req->finished = true;
      req->finish_reason = "cancelled";
      req->cv.notify_all();
      continue;
    }
    Active a;
    a.req = req;
    Session* s = nullptr;
    bool new_seq = true;
    if (!req->session_id.empty()) {
      auto it = sessions_.find(req->session_id);
      if (it != sessions_.end()) {
        s = &it->second;
        new_seq = false;
      }
    }
    // Every live sequence may need its full block budget: admit only what fits.
    const int sessions_held = static_cast<int>(sessions_.size());
    int live = sessions_held;
    for (const auto& x : active_) live += x.session ? 0 : 1;
    if (new_seq && (live + 1) * per > engine_.pool().total_blocks()) {
      if (live == 0) {
        finish(a, "error", "KV pool too small for one sequence", 503);
      } else if ((sessions_held + 1) * per > engine_.pool().total_blocks()) {
        // Sessions keep their blocks until deleted: waiting would not help.
        finish(a, "error",
               "KV cache full: " + std::to_string(sessions_held) +
                   " sessions hold its blocks; delete a session (DELETE /v1/sessions/{id}) or retry later",
               503);
      } else {
        keep.push_back(req);  // waits for a running one-off request to finish
      }
      continue;
    }
    if (new_seq) {
      auto id = engine_.create_sequence(opts_.policy.kind == PolicyKind::Recompute ? KvPolicy::dense() : opts_.policy);
      if (!id.ok()) {
        finish(a, "error", id.error().message, 500);
        continue;
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
      std::lock_guard<std::mutex> lock(mu_);
      s->busy = true;
      s->info.busy = true;
    }
    a.feed.insert(a.feed.end(), req->tokens.begin(), req->tokens.end());
    const SequenceKv* seq = engine_.sequence(a.seq);
    a.from_start = seq && seq->n_seen() == 0;
    if (a.feed.empty()) {
      if (a.from_start && model_->vocab.bos >= 0)
        a.feed.push_back(model_->vocab.bos);
      else {
        finish(a, "error", "empty prompt", 400);
        continue;
      }
    }
    req->prompt_tokens = static_cast<int64_t>(a.feed.size());
    a.sampler.emplace(req->sampling);
    a.detok.emplace(tokenizer_);
    a.out.emplace(req->stop);
    a.history.assign(a.feed.end() - std::min<ptrdiff_t>(static_cast<ptrdiff_t>(a.feed.size()), 64), a.feed.end());
    try_share_sinks(a);
    {
      std::lock_guard<std::mutex> lk(a.req->mu);
      a.req->admitted = true;
    }
    a.req->cv.notify_all();
    active_.push_back(std::move(a));
  }
  if (!keep.empty()) {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = keep.rbegin(); it != keep.rend(); ++it) queue_.push_front(*it);
  }
}

void Scheduler::finish(Active& a, const std::string& reason, const std::string& error, int status) {
  if (a.detok && a.out && reason != "error") a.out->push(a.detok->flush());
  // Session bookkeeping and the durable write happen before the client hears
  // the turn is over, so its next request finds the session idle and saved.
  if (a.session) {
    Session& s = *a.session;
    if (a.last >= 0) s.pending = {a.last};
    s.busy = false;
    s.turns += 1;
    s.tokens_in += a.req->prompt_tokens;
    s.tokens_out += a.req->completion_tokens;
    if (auto st = persist(a.req->session_id, s); !st.ok()) {
      std::lock_guard<std::mutex> lk(a.req->mu);
      a.req->persist_error = "session '" + a.req->session_id + "' was not saved: " + st.error().message;
    }
    std::lock_guard<std::mutex> lock(mu_);
    refresh_info(a.req->session_id, s);
  } else if (a.seq >= 0) {
    engine_.free_sequence(a.seq);
  }
  a.seq = -1;
  {
    std::lock_guard<std::mutex> lk(a.req->mu);
    if (a.out && reason != "error") a.req->pending_text += a.out->finish();
    a.req->finished = true;
    a.req->finish_reason = reason;
    a.req->error = error;
    a.req->error_status = status;
  }
  a.req->cv.notify_all();
  prune_sink_registry();
}

void Scheduler::prune_sink_registry() {
  // Drop registry entries nobody else uses any more.
  for (auto it = sink_registry_.begin(); it != sink_registry_.end();) {
    bool unused = true;
    for (BlockId b : it->second) unused = unused && engine_.pool().refcount(b) == 1;
    if (unused) {
      for (BlockId b : it->second) engine_.pool().release(b);
      it = sink_registry_.erase(it);
    } else {
      ++it;
    }
  }
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
      chunk[i] = static_cast<int>(std::min<size_t>(a.feed.size() - a.fed, static_cast<size_t>(opts_.max_chunk)));
      items.push_back({a.seq, std::span<const int32_t>(a.feed).subspan(a.fed, static_cast<size_t>(chunk[i])), false});
    } else {
      items.push_back({a.seq, std::span<const int32_t>(&a.last, 1), false});
    }
  }
  std::vector<std::vector<float>> logits;
  const auto t0 = Clock::now();
  const Status st = engine_.forward(items, logits);
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  if (!st.ok()) {
    for (auto& a : active_) finish(a, "error", st.error().message, 503);
    active_.clear();
    return;
  }
  int64_t decoded = 0, prefilled = 0;
  for (size_t i = 0; i < active_.size(); ++i) {
    Active& a = active_[i];
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
    const int32_t tok = a.sampler->sample(logits[i], a.history);
    a.last = tok;
    a.history.push_back(tok);
    if (a.history.size() > 256) a.history.erase(a.history.begin(), a.history.begin() + 128);
    {
      std::lock_guard<std::mutex> lk(r.mu);
      ++r.completion_tokens;
    }
    if (model_->vocab.is_eog(tok)) {
      finish(a, "stop");
      continue;
    }
    if (a.out->push(a.detok->push(tok))) {
      a.detok.reset();  // text after the stop string is dropped
      finish(a, "stop");
      continue;
    }
    if (r.max_tokens > 0 && r.completion_tokens >= r.max_tokens) {
      finish(a, "length");
      continue;
    }
    if (std::string ready = a.out->take(); !ready.empty()) {
      {
        std::lock_guard<std::mutex> lk(r.mu);
        r.pending_text += ready;
      }
      r.cv.notify_all();
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    metrics_.tokens_in += prefilled;
    metrics_.tokens_out += decoded;
    if (decoded > 0) {
      for (size_t b = 0; b < metrics_.latency_buckets_ms.size(); ++b)
        if (ms <= metrics_.latency_buckets_ms[b]) metrics_.latency_counts[b] += decoded;
      metrics_.latency_sum_ms += ms * static_cast<double>(decoded);
      metrics_.latency_count += decoded;
    }
    for (auto& a : active_)
      if (a.session && !a.req->finished) refresh_info(a.req->session_id, *a.session);
  }
  active_.erase(std::remove_if(active_.begin(), active_.end(), [](const Active& a) { return a.req->finished; }),
                active_.end());
}

}  // namespace ss
