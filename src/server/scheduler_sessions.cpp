// Sessions and the KV budget: queries, deletion, durable state, and moving
// idle sessions between the pool and disk (least recently used first).
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "server/scheduler.h"

namespace ss {

Scheduler::~Scheduler() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
  for (auto& a : active_) finish(a, "cancelled");
  for (auto& q : queue_) {
    {
      std::lock_guard<std::mutex> lk(q->mu);
      q->finished = true;
      q->finish_reason = "cancelled";
    }
    q->notify();
  }
  if (own_spill_dir_) {
    if (DIR* d = ::opendir(spill_dir_.c_str())) {
      while (dirent* e = ::readdir(d))
        if (e->d_name[0] != '.') ::unlink((spill_dir_ + "/" + e->d_name).c_str());
      ::closedir(d);
    }
    ::rmdir(spill_dir_.c_str());
  }
}

int Scheduler::blocks_per_sequence() const {
  return ::ss::blocks_per_sequence(opts_.policy, model_->config.trained_context, engine_.options().block_tokens,
                                   engine_.options().max_chunk);
}

int Scheduler::blocks_promised(int extra) const {
  const int per = blocks_per_sequence();
  int need = extra;
  for (const auto& a : active_)
    if (const SequenceKv* s = engine_.sequence(a.seq)) need += std::max(0, per - s->blocks_held());
  return need;
}

bool Scheduler::make_room(int need) {
  sinks_.prune(engine_.pool());
  std::vector<std::string> failed;
  while (engine_.pool().free_blocks() < need) {
    std::string victim;
    uint64_t oldest = UINT64_MAX;
    for (auto& [id, s] : sessions_)
      if (s.seq >= 0 && !s.busy && s.last_used < oldest &&
          std::find(failed.begin(), failed.end(), id) == failed.end()) {
        oldest = s.last_used;
        victim = id;
      }
    if (victim.empty()) return false;
    if (!spill(victim, sessions_[victim])) failed.push_back(victim);
    sinks_.prune(engine_.pool());
  }
  return true;
}

SessionRecord Scheduler::record_of(const std::string& id, const Session& s) const {
  SessionRecord r;
  r.id = id;
  r.state = engine_.export_sequence(s.seq);
  r.pending = s.pending;
  r.turns = s.turns;
  r.tokens_in = s.tokens_in;
  r.tokens_out = s.tokens_out;
  r.last_key = s.last_key;
  r.last_reply = s.last_reply;
  return r;
}

void Scheduler::adopt_counters(Session& s, const SessionRecord& r) {
  s.pending = r.pending;
  s.turns = r.turns;
  s.tokens_in = r.tokens_in;
  s.tokens_out = r.tokens_out;
  s.last_key = r.last_key;
  s.last_reply = r.last_reply;
}

bool Scheduler::spill(const std::string& id, Session& s) {
  if (s.seq < 0) return true;
  if (!s.file_current) {
    if (session_dir().empty()) return false;
    if (auto st = save_session(session_dir(), record_of(id, s), fp_); !st.ok()) {
      std::fprintf(stderr, "[sinkstream] cannot spill session %s: %s (it stays in the pool)\n", id.c_str(),
                   st.error().message.c_str());
      std::lock_guard<std::mutex> lock(mu_);
      ++metrics_.persist_errors;
      return false;
    }
    s.file_current = true;
  }
  engine_.free_sequence(s.seq);
  s.seq = -1;
  s.shared_sinks = false;  // it owns its sinks when it comes back
  std::lock_guard<std::mutex> lock(mu_);
  s.info.resident = false;
  s.info.shared_sinks = false;
  ++metrics_.session_spills;
  return true;
}

Status Scheduler::unspill(const std::string& id, Session& s) {
  std::string fallback;
  auto r = load_session(session_path(session_dir(), id), fp_, &fallback);
  if (!fallback.empty()) {
    std::fprintf(stderr, "[sinkstream] session %s: %s\n", id.c_str(), fallback.c_str());
    std::lock_guard<std::mutex> lock(mu_);
    ++metrics_.session_fallbacks;
  }
  if (!r.ok()) return r.error();
  auto seq = engine_.import_sequence(r.value().state);
  if (!seq.ok()) return seq.error();
  s.seq = seq.value();
  s.stamp = stamp_of(id);
  if (!fallback.empty()) adopt_counters(s, r.value());  // the previous copy is one turn behind: take all of it
  if (opts_.state_dir.empty()) {
    (void)remove_session(spill_dir_, id);  // the turn about to run makes it stale anyway
    s.file_current = false;
  }
  std::lock_guard<std::mutex> lock(mu_);
  ++metrics_.session_restores;
  return ok_status();
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
    if (it->second.seq >= 0) engine_.free_sequence(it->second.seq);
    sessions_.erase(it);
    sinks_.prune(engine_.pool());  // its sink blocks, if registered, go back to the pool now
    refresh_pool_metrics();
    if (!session_dir().empty()) (void)remove_session(session_dir(), id);
    return true;
  });
}

SchedulerMetrics Scheduler::metrics() {
  std::lock_guard<std::mutex> lock(mu_);
  SchedulerMetrics m = metrics_;
  m.queued = static_cast<int64_t>(queue_.size());
  m.sessions = static_cast<int64_t>(sessions_.size());
  m.sessions_resident = 0;
  for (const auto& [id, s] : sessions_) m.sessions_resident += s.info.resident ? 1 : 0;
  m.sessions_spilled = m.sessions - m.sessions_resident;
  return m;
}

int Scheduler::retry_after_s() const {
  // Waiting requests drain max_batch at a time, each taking about the mean
  // request time: a retry after that many rounds may find room.
  const double rounds = static_cast<double>(queue_.size()) / std::max(1, opts_.max_batch) + 1.0;
  return static_cast<int>(std::clamp(std::ceil(mean_request_s_ * rounds), 1.0, 600.0));
}

namespace {
void fill_cache_info(SessionInfo& i, const KvPolicy& p, int64_t n_seen, int64_t cached) {
  i.tokens_seen = n_seen;
  i.sinks = std::min(p.sinks, n_seen);
  i.window = cached - i.sinks;
  i.capacity_sinks = p.sinks;
  i.capacity_window = p.bounded() ? p.window : -1;
  i.evicted = n_seen - cached;
}
}  // namespace

void Scheduler::refresh_info(const std::string& id, Session& s) {
  SessionInfo& i = s.info;
  i.id = id;
  i.turns = s.turns;
  i.tokens_in = s.tokens_in;
  i.tokens_out = s.tokens_out;
  i.busy = s.busy;
  i.shared_sinks = s.shared_sinks;
  i.resident = s.seq >= 0;
  if (const SequenceKv* seq = engine_.sequence(s.seq))
    fill_cache_info(i, seq->policy(), seq->n_seen(), seq->cached_entries());
}

Scheduler::FileStamp Scheduler::stamp_of(const std::string& id) const {
  struct stat st {};
  if (opts_.state_dir.empty()) return {};
  const std::string path = session_path(opts_.state_dir, id);
  if (::stat(path.c_str(), &st) != 0) return {};
  return {static_cast<uint64_t>(st.st_ino), static_cast<uint64_t>(st.st_size),
          static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec,
          opts_.shared_store ? peek_session_turns(path) : 0};
}

void Scheduler::sync_session(const std::string& id) {
  if (!opts_.shared_store || opts_.state_dir.empty()) return;
  run_on_loop<int>([this, id] {
    const FileStamp now = stamp_of(id);
    auto it = sessions_.find(id);
    if (it != sessions_.end() && (it->second.busy || now == it->second.stamp)) return 0;
    if (it != sessions_.end() && it->second.seq >= 0) {
      engine_.free_sequence(it->second.seq);
      it->second.seq = -1;
    }
    if (now == FileStamp{}) {  // never saved, or deleted through another replica
      if (it != sessions_.end()) {
        std::lock_guard<std::mutex> lock(mu_);
        sessions_.erase(it);
      }
      return 0;
    }
    // Started or moved on by another replica: its counters and last reply
    // now; its KV from the same file when the turn starts (unspill).
    auto r = load_session(session_path(opts_.state_dir, id), fp_);
    std::lock_guard<std::mutex> lock(mu_);
    if (!r.ok()) {
      std::fprintf(stderr, "[sinkstream] session %s: %s\n", id.c_str(), r.error().message.c_str());
      ++metrics_.session_files_rejected;
      if (it != sessions_.end()) sessions_.erase(it);
      return 0;
    }
    Session& s = sessions_[id];
    s.seq = -1;
    s.shared_sinks = false;
    s.file_current = true;
    s.stamp = now;
    adopt_counters(s, r.value());
    refresh_info(id, s);
    fill_cache_info(s.info, r.value().state.policy, r.value().state.n_seen,
                    static_cast<int64_t>(r.value().state.indices.size()));
    ++metrics_.store_reloads;
    return 0;
  });
}

std::optional<std::string> Scheduler::replay(const std::string& id, const std::string& key) {
  if (key.empty()) return std::nullopt;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = sessions_.find(id);
  if (it == sessions_.end() || it->second.busy || it->second.last_key != key) return std::nullopt;
  return it->second.last_reply;
}

void Scheduler::sweep_stale_saves(bool at_start) {
  const auto now = std::chrono::steady_clock::now();
  if (!at_start && now - last_sweep_ < opts_.stale_sweep_every) return;
  last_sweep_ = now;
  const int n = remove_stale_temporaries(opts_.state_dir, std::chrono::hours(1));
  if (n <= 0) return;
  const std::string line = "removed " + std::to_string(n) + " unfinished save(s) older than an hour";
  if (at_start)
    startup_log_.push_back(line);
  else
    std::fprintf(stderr, "[sinkstream] %s\n", line.c_str());
}

Status Scheduler::persist(const std::string& id, Session& s) {
  if (opts_.state_dir.empty()) return ok_status();
  // Compare and swap: the file must be the version this turn started from.
  if (opts_.shared_store && !(stamp_of(id) == s.stamp)) {
    std::lock_guard<std::mutex> lock(mu_);
    ++metrics_.persist_errors;
    return make_error("another replica saved this session during the turn; not overwritten");
  }
  std::string note;
  const Status st = save_session(opts_.state_dir, record_of(id, s), fp_, &note);
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
  s.file_current = true;
  s.stamp = stamp_of(id);
  return ok_status();
}

void Scheduler::restore_sessions() {
  // Sessions come back spilled: each file is validated now (a bad one is
  // reported at start, not on its next turn), but its KV is read into the
  // pool only when the session is used again.
  const int per = blocks_per_sequence();
  const auto& eo = engine_.options();
  sweep_stale_saves(/*at_start=*/true);
  for_each_session(
      opts_.state_dir, fp_, startup_log_, &metrics_.session_fallbacks, &metrics_.session_files_rejected,
      [&](SessionRecord&& r) {
        const KvPolicy& p = r.state.policy;
        if (!p.bounded() ||
            ::ss::blocks_per_sequence(p, model_->config.trained_context, eo.block_tokens, eo.max_chunk) > per) {
          startup_log_.push_back("session " + r.id + " was saved with policy " + p.name() +
                                 ", larger than this server's " + opts_.policy.name() + "; not restored");
          ++metrics_.session_files_rejected;
          return;
        }
        if (p.name() != opts_.policy.name())
          startup_log_.push_back("session " + r.id + " was saved with policy " + p.name() + "; restored with it");
        Session s;
        adopt_counters(s, r);
        s.file_current = true;
        s.stamp = stamp_of(r.id);
        auto& ref = sessions_[r.id] = std::move(s);
        refresh_info(r.id, ref);
        fill_cache_info(ref.info, p, r.state.n_seen, static_cast<int64_t>(r.state.indices.size()));
        startup_log_.push_back("restored session " + r.id + " (" + std::to_string(ref.info.tokens_seen) +
                               " tokens seen, on disk)");
      });
}

void Scheduler::refresh_pool_metrics() {
  metrics_.kv_blocks_used = engine_.pool().used_blocks();
  metrics_.kv_blocks_total = engine_.pool().total_blocks();
  metrics_.kv_blocks_shared = sinks_.blocks();
}

}  // namespace ss
