#pragma once
// Continuous batching: one scheduler thread owns the engine. Every step runs a
// single batched forward over all active requests (prefill chunks and decode
// tokens together); new requests join between steps. Sessions keep their KV
// cache (sinks + window) between requests, so a new turn prefills only its
// new tokens. HTTP threads talk to it only through requests and commands.
//
// KV budget: every active request may grow to a full sequence's worth of
// blocks, so a request joins only when that fits beside the others. Idle
// sessions hold blocks too, but only until someone needs them: the least
// recently used are spilled to disk (their file is already current when
// --state-dir is set) and come back on their next turn, so sessions are
// bounded by disk, not by the pool, and never crowd out a one-off request.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "kv/sink_registry.h"
#include "model/tokenizer.h"
#include "runtime/engine.h"
#include "sample/constraint.h"
#include "sample/sampler.h"
#include "server/generation_request.h"
#include "server/http_error.h"
#include "server/scheduler_metrics.h"
#include "server/session_file.h"
#include "server/stream_text.h"

namespace ss {

struct SchedulerOptions {
  KvPolicy policy;
  int threads = 1;
  ActQuant act_quant = ActQuant::None;
  std::optional<float> sink_logit;   // EngineOptions::sink_logit
  GgmlType kv_type = GgmlType::F32;  // EngineOptions::kv_type
  int kv_blocks = 0;                 // 0: enough for max_batch sequences
  int max_chunk = 64;
  int max_batch = 64;         // active requests per step
  int max_queue = 256;        // waiting requests; more get 503
  int max_sessions = 100000;  // sessions known (resident or spilled): a disk budget
  std::string state_dir;      // durable sessions, saved after every turn (empty: none)
  // Where idle sessions go under pool pressure when there is no state_dir
  // (empty: a private temporary directory, removed at exit).
  std::string spill_dir;
  // Replicas share state_dir (docs/SCALING.md): before a turn the session
  // is checked against its file and reloaded when another replica moved it
  // on; a save never overwrites a file this replica did not last see.
  bool shared_store = false;
  // How often a running server also removes unfinished saves in state_dir
  // older than an hour (a replica beside it killed mid-write; its own
  // start sweeps them too), checked after each saved turn is answered.
  std::chrono::seconds stale_sweep_every{3600};
};

class Scheduler {
 public:
  Scheduler(std::shared_ptr<const Model> model, const SchedulerOptions& opts);
  ~Scheduler();

  const Model& model() const { return *model_; }
  const Tokenizer& tokenizer() const { return tokenizer_; }
  const SchedulerOptions& options() const { return opts_; }

  // Queues a request, or says why not: 400 bad token ids, 503 queue full
  // (with a Retry-After estimate), 429 session limit, 409 session busy.
  HttpRefusal submit(std::shared_ptr<GenerationRequest> req);
  std::optional<SessionInfo> session(const std::string& id);
  bool session_exists(const std::string& id);
  bool delete_session(const std::string& id);
  std::vector<SessionInfo> sessions();
  SchedulerMetrics metrics();
  // shared_store: brings session `id` up to date with the store (a session
  // first seen here, or moved on by another replica, will be read from its
  // file when its turn starts; one deleted elsewhere is dropped). The
  // caller holds the session's lease.
  void sync_session(const std::string& id);
  // The reply of session `id`'s last turn when that turn carried `key`.
  std::optional<std::string> replay(const std::string& id, const std::string& key);
  // Messages from restoring sessions at start-up (problems found).
  const std::vector<std::string>& startup_log() const { return startup_log_; }
  // Cancels everything queued or running (shutdown); returns how many.
  int cancel_all();
  void wake();

 private:
  // Identity of a session file version: a rename makes a new inode.
  // With the turn count from the header: a save on a file system with
  // coarse timestamps that reuses an inode still changes it.
  struct FileStamp {
    uint64_t ino = 0, size = 0;
    int64_t mtime_ns = 0, turns = 0;
    bool operator==(const FileStamp&) const = default;
  };
  FileStamp stamp_of(const std::string& id) const;  // zero when there is no file
  struct Session {
    SeqId seq = -1;  // -1: spilled (its KV is in its file)
    std::vector<int32_t> pending;
    int64_t turns = 0, tokens_in = 0, tokens_out = 0;
    bool busy = false;
    bool shared_sinks = false;
    bool file_current = false;         // its file on disk (state or spill dir) matches the pool
    FileStamp stamp;                   // the file as this replica last wrote or read it
    std::string last_key, last_reply;  // the last turn's Idempotency-Key and reply
    uint64_t last_used = 0;            // LRU clock
    SessionInfo info;                  // snapshot readable by HTTP threads
  };
  struct Active {
    std::shared_ptr<GenerationRequest> req;
    SeqId seq = -1;
    Session* session = nullptr;
    std::vector<int32_t> feed;  // tokens still to prefill
    size_t fed = 0;
    size_t prompt_begin = 0;  // feed index of the request's first prompt token (after a session's pending token)
    bool from_start = false;  // feed[0] is the sequence's first token (no earlier turn)
    int32_t last = -1;        // sampled, to feed next step
    bool decoding = false;
    std::optional<Sampler> sampler;
    std::optional<Constraint> shape;  // structured output (schema or grammar): the answer so far
    std::vector<int32_t> history;
    std::optional<Detokenizer> detok;
    std::optional<StreamText> out;  // generated text: stop strings, hold-back, what may be sent
    std::string reply;              // all of it so far (kept for an idempotent session turn)
    std::chrono::steady_clock::time_point started;
  };

  // Batching (scheduler.cpp).
  void loop();
  void run_commands();
  void admit();
  // Starts req, finishes it with an error, or appends it to keep (no room yet).
  void admit_one(const std::shared_ptr<GenerationRequest>& req, std::deque<std::shared_ptr<GenerationRequest>>& keep);
  void step();
  size_t vocab_size() const;
  // Entries for the prompt tokens that `n` rows of all-token logits (the
  // chunk starting at a.fed) predict.
  void score_prompt_rows(Active& a, std::span<const float> rows, size_t n);
  void finish(Active& a, const std::string& reason, const std::string& error = {}, int status = 0);
  void try_share_sinks(Active& a);
  void register_sinks(Active& a);
  template <typename T>
  T run_on_loop(std::function<T()> fn);

  // Sessions and the KV budget (scheduler_sessions.cpp).
  int blocks_per_sequence() const;
  // Blocks the active requests may still allocate, plus `extra`.
  int blocks_promised(int extra) const;
  // Spills idle sessions (least recently used first) until `need` blocks are
  // free; false if that is impossible now.
  bool make_room(int need);
  SessionRecord record_of(const std::string& id, const Session& s) const;
  // A record's counters, pending tokens and last reply into s (not its KV).
  static void adopt_counters(Session& s, const SessionRecord& r);
  bool spill(const std::string& id, Session& s);
  Status unspill(const std::string& id, Session& s);
  void refresh_info(const std::string& id, Session& s);
  Status persist(const std::string& id, Session& s);
  const std::string& session_dir() const { return opts_.state_dir.empty() ? spill_dir_ : opts_.state_dir; }
  void restore_sessions();
  void sweep_stale_saves(bool at_start);  // the loop's thread (or no loop yet)
  void refresh_pool_metrics();            // mu_ held (or no loop yet)
  int retry_after_s() const;              // mu_ held

  std::shared_ptr<const Model> model_;
  SchedulerOptions opts_;
  Tokenizer tokenizer_;
  // Structured output: every token's bytes (built on first use) and the masked logits.
  std::unique_ptr<ConstraintVocab> constraint_vocab_;  // made with the first structured request
  std::vector<float> masked_;
  Engine engine_;
  ModelFingerprint fp_;
  std::string spill_dir_;
  bool own_spill_dir_ = false;

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<GenerationRequest>> queue_;
  std::deque<std::function<void()>> commands_;
  std::map<std::string, Session> sessions_;  // touched by the loop; info read under mu_
  std::vector<Active> active_;
  SinkRegistry sinks_;
  uint64_t lru_clock_ = 0;
  double mean_request_s_ = 1.0;  // moving average of admitted-to-finished time (Retry-After)
  SchedulerMetrics metrics_;
  std::vector<std::string> startup_log_;
  std::chrono::steady_clock::time_point last_sweep_;
  bool stop_ = false;
  std::thread thread_;
};

template <typename T>
inline T Scheduler::run_on_loop(std::function<T()> fn) {
  auto p = std::make_shared<std::promise<T>>();
  auto f = p->get_future();
  {
    std::lock_guard<std::mutex> lock(mu_);
    commands_.push_back([fn, p] { p->set_value(fn()); });
  }
  cv_.notify_all();
  return f.get();
}

}  // namespace ss
