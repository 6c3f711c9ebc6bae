#pragma once
// Continuous batching: one scheduler thread owns the engine. Every step runs a
// single batched forward over all active requests (prefill chunks and decode
// tokens together); new requests join between steps. Sessions keep their KV
// cache (sinks + window) between requests, so a new turn prefills only its
// new tokens. HTTP threads talk to it only through requests and commands.
#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "model/tokenizer.h"
#include "runtime/engine.h"
#include "sample/sampler.h"
#include "server/session_file.h"
#include "server/stream_text.h"

namespace ss {

struct SchedulerOptions {
  KvPolicy policy;
  int threads = 1;
  ActQuant act_quant = ActQuant::None;
  int kv_blocks = 0;  // 0: enough for max_sessions + max_batch sequences
  int max_chunk = 64;
  int max_batch = 64;   // active requests per step
  int max_queue = 256;  // waiting requests; more get 429
  int max_sessions = 256;
  std::string state_dir;  // empty: no persistence
};

// One generation request and its output channel.
struct GenerationRequest {
  std::vector<int32_t> tokens;  // new tokens to prefill
  SamplingParams sampling;
  int64_t max_tokens = -1;  // -1: until EOS or a stop string
  std::vector<std::string> stop;
  std::string session_id;  // empty: a one-off sequence

  // Output, guarded by mu.
  std::mutex mu;
  std::condition_variable cv;
  std::string pending_text;  // produced, not yet taken by the HTTP side
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
  // Waits until the request runs or has finished (e.g. refused); true if it runs.
  bool wait_admitted();
};

struct SessionInfo {
  std::string id;
  int64_t tokens_seen = 0;
  int64_t sinks = 0, window = 0;  // entries in the cache now
  int64_t capacity_sinks = 0, capacity_window = 0;
  int64_t evicted = 0;
  int64_t turns = 0, tokens_in = 0, tokens_out = 0;
  bool busy = false;
  bool shared_sinks = false;
};

struct SchedulerMetrics {
  int64_t requests_total = 0, requests_rejected = 0, tokens_in = 0, tokens_out = 0;
  int64_t active = 0, queued = 0, sessions = 0;
  int64_t kv_blocks_used = 0, kv_blocks_total = 0;
  std::vector<double> latency_buckets_ms;  // upper bounds
  std::vector<int64_t> latency_counts;     // cumulative per bucket
  double latency_sum_ms = 0;
  int64_t latency_count = 0;
  int64_t persist_errors = 0;
  int64_t session_fallbacks = 0;        // sessions restored from .bak at start (newest file bad)
  int64_t session_files_rejected = 0;   // sessions that could not be restored at all
  int64_t session_files_discarded = 0;  // corrupt newest files dropped on save instead of kept as .bak
};

class Scheduler {
 public:
  Scheduler(std::shared_ptr<const Model> model, const SchedulerOptions& opts);
  ~Scheduler();

  const Model& model() const { return *model_; }
  const Tokenizer& tokenizer() const { return tokenizer_; }
  const SchedulerOptions& options() const { return opts_; }

  // Queues a request. Errors: 429 queue full, 404/409 session problems (as
  // Error messages prefixed with the status, see status_of).
  Status submit(std::shared_ptr<GenerationRequest> req);
  std::optional<SessionInfo> session(const std::string& id);
  bool session_exists(const std::string& id);
  bool delete_session(const std::string& id);
  std::vector<SessionInfo> sessions();
  SchedulerMetrics metrics();
  // Messages from restoring sessions at start-up (problems found).
  const std::vector<std::string>& startup_log() const { return startup_log_; }
  void wake();

 private:
  struct Session {
    SeqId seq = -1;
    std::vector<int32_t> pending;
    int64_t turns = 0, tokens_in = 0, tokens_out = 0;
    bool busy = false;
    bool shared_sinks = false;
    SessionInfo info;  // snapshot readable by HTTP threads
  };
  struct Active {
    std::shared_ptr<GenerationRequest> req;
    SeqId seq = -1;
    Session* session = nullptr;
    std::vector<int32_t> feed;  // tokens still to prefill
    size_t fed = 0;
    bool from_start = false;  // feed[0] is the sequence's first token (no earlier turn)
    int32_t last = -1;        // sampled, to feed next step
    bool decoding = false;
    std::optional<Sampler> sampler;
    std::vector<int32_t> history;
    std::optional<Detokenizer> detok;
    std::optional<StreamText> out;  // generated text: stop strings, hold-back, what may be sent
  };

  void loop();
  void run_commands();
  void admit();
  void step();
  void finish(Active& a, const std::string& reason, const std::string& error = {}, int status = 0);
  void refresh_info(const std::string& id, Session& s);
  Status persist(const std::string& id, Session& s);
  void restore_sessions();
  void try_share_sinks(Active& a);
  void register_sinks(Active& a);
  void prune_sink_registry();
  void refresh_pool_metrics();  // mu_ held (or no loop yet)
  int blocks_per_sequence() const;
  template <typename T>
  T run_on_loop(std::function<T()> fn);

  std::shared_ptr<const Model> model_;
  SchedulerOptions opts_;
  Tokenizer tokenizer_;
  Engine engine_;
  ModelFingerprint fp_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<GenerationRequest>> queue_;
  std::deque<std::function<void()>> commands_;
  std::map<std::string, Session> sessions_;  // touched by the loop; info read under mu_
  std::vector<Active> active_;
  std::map<std::vector<int32_t>, std::vector<BlockId>> sink_registry_;  // first S tokens -> shared blocks
  SchedulerMetrics metrics_;
  std::vector<std::string> startup_log_;
  bool stop_ = false;
  std::thread thread_;
};

// "429: queue full" -> 429 (errors from submit carry their HTTP status).
int status_of(const Error& e);

}  // namespace ss
