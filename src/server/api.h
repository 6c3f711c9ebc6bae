#pragma once
// The OpenAI-compatible API as plain functions of a request, apart from the
// transport (http_server.cpp): /v1/models, /v1/completions,
// /v1/chat/completions (JSON or SSE), /v1/sessions[/{id}], /health,
// /metrics and the chat page at /. A completion becomes a Generation that
// the transport drives as the scheduler produces text.
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sample/gbnf.h"
#include "server/chat_template.h"
#include "server/harmony_split.h"
#include "server/http_error.h"
#include "server/scheduler.h"

namespace ss {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;
  std::string api_key;
  std::string model_name;  // empty: the model file or directory name
  ChatFamily chat = ChatFamily::Plain;
  ChatTemplateDefaults chat_defaults;  // what the model's template adds (default system, Llama 3.1 header)
  size_t max_body_bytes = 1 << 20;     // every framing: Content-Length and chunked
  size_t max_header_bytes = 16 << 10;
  int max_header_fields = 100;
  int64_t max_prompt_tokens = 1 << 16;
  int64_t max_tokens_limit = 0;  // 0: no limit (endless until EOS or stop)
  // max_tokens for a non-stream request that names none: its client sees
  // nothing until the end, so it must end (0: until EOS or a stop string).
  // Streams without max_tokens stay endless; they end when the client leaves.
  int64_t default_max_tokens = 4096;
  int io_threads = 2;            // event loop threads (sockets, timers)
  int worker_threads = 4;        // request handling that may block (tokenizing, session commands)
  int max_connections = 4096;    // more are closed at accept (also capped by the fd limit)
  double header_timeout_s = 10;  // from a request's first byte to the end of its headers
  double body_timeout_s = 30;    // to read a request body
  double idle_timeout_s = 120;   // a keep-alive connection waiting for its next request
  double write_timeout_s = 60;   // a client that stops reading is dropped
  double drain_s = 10;           // on stop: running requests get this long, then are cancelled
  // Host names accepted besides the loopback ones when bound to loopback
  // (DNS-rebinding protection); ignored when bound to another address.
  std::vector<std::string> allowed_hosts;
  // A fleet (docs/SCALING.md): every response says which replica served it
  // (X-Sinkstream-Replica); with shared_store, replicas share the
  // scheduler's state_dir and each session turn holds a lease there.
  std::string replica_id;
  bool shared_store = false;
  double lease_wait_s = 10;     // a turn waits this long for its session's lease
  double lease_expire_s = 600;  // a lease older than this is broken (its replica died on another host)
};

struct HttpReply {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
};

HttpReply error_reply(const HttpError& e);
// A 200 with j as its JSON body.
HttpReply json_reply(const nlohmann::json& j);

// One completion in flight: formats what the scheduler produces.
// Chat output: deltas for newly streamed text (done: the end, so nothing is
// held back) and the whole message of a non-stream answer. With harmony
// (gpt-oss), the analysis channel is reasoning_content and the final
// channel content, as llama.cpp's server and OpenAI's API return them.
std::vector<nlohmann::json> chat_deltas(HarmonySplit* harmony, const std::string& text, bool done);
nlohmann::json chat_message(const std::string& text, bool harmony);

class Generation {
 public:
  std::shared_ptr<GenerationRequest> req;
  bool stream = false;
  // A request that failed (refused before it ran, or an error while it ran) as an HTTP status.
  HttpReply refusal() const;
  std::vector<std::pair<std::string, std::string>> stream_headers() const;
  // SSE events for newly produced text; with done, the final chunk (usage,
  // finish_reason) or an error event, and [DONE].
  std::string events(const std::string& text, bool done);
  // An error event and [DONE] (something failed while streaming).
  static std::string error_events(const std::string& message);
  // The whole answer of a non-stream request.
  HttpReply final_reply(const std::string& text) const;

 private:
  friend class Api;
  friend class Completion;
  // The choice as the whole answer lists it (message or text, finish_reason, logprobs).
  nlohmann::json final_choice(const std::string& text) const;
  // id, object, created, model and the one choice, for a chunk or the whole answer.
  nlohmann::json envelope(const nlohmann::json& content, const nlohmann::json& finish, bool stream_chunk,
                          const nlohmann::json& logprobs = nullptr) const;
  std::string chunk(const nlohmann::json& delta_or_text, const nlohmann::json& finish, bool with_usage,
                    const nlohmann::json& logprobs = nullptr) const;
  nlohmann::json usage() const;
  // The tokens' log-probabilities produced since the last call, in OpenAI's
  // shape for this endpoint (chat: content entries; completions: the
  // legacy tokens / token_logprobs / top_logprobs lists).
  nlohmann::json take_logprobs() const;
  // A token's text as the answer shows it (first: no text shown before it).
  std::string token_text(int32_t id, bool first) const;
  const Tokenizer* tok_ = nullptr;
  bool logprobs_ = false;
  // Text precedes the next logprobs entry (an entry with text went out, or
  // the answer continues a prompt): no SentencePiece word-start space to drop.
  mutable bool answer_started_ = false;
  std::string echo_text_;  // completions with echo: the prompt, shown before the answer
  bool chat_ = false;
  // gpt-oss chats: the analysis channel goes out as reasoning_content, the
  // final channel as content (as llama.cpp's server and OpenAI's API do).
  std::shared_ptr<HarmonySplit> harmony_;
  // Chat with tools: the answer (JSON) is held back until it is whole, then
  // sent as a tool call or as content (server/tool_calls.h).
  bool tools_ = false;
  bool harmony_tools_ = false;  // gpt-oss's own tool calls (harmony_tools.h)
  std::string held_;
  bool sent_role_ = false;
  bool replayed_ = false;  // the saved reply of a turn already done (Idempotency-Key)
  std::string id_, model_, session_id_;
  int64_t created_ = 0;
  int index_ = 0;     // the choice's index in the answer
  bool sole_ = true;  // the request's only choice: its last chunk has usage, then [DONE]
};

// Every choice of one request (n per prompt, several prompts), as the
// transport drives them: a stream interleaves the choices' chunks (each
// with its index) and ends with a usage chunk (no choices) and [DONE] once
// all have finished; a whole answer lists the choices in index order. One
// choice keeps the single-choice shape (usage in its last chunk).
class Completion {
 public:
  std::vector<std::shared_ptr<Generation>> choices;
  bool stream = false;
  // A choice that was refused before it ran (or failed): the HTTP status to answer.
  std::optional<HttpReply> refused() const;
  bool all_admitted() const;
  std::vector<std::pair<std::string, std::string>> stream_headers() const { return choices[0]->stream_headers(); }
  // Stream: the events ready now; done once the stream is over.
  std::string events(bool& done);
  // Whole answer: set once every choice has finished.
  std::optional<HttpReply> poll_final();
  void cancel();
  int n_per_prompt = 1;  // choices i * n .. i * n + n - 1 answer prompt i

 private:
  nlohmann::json usage() const;
  std::vector<std::string> texts_;
  std::vector<bool> finished_;
};

struct ApiRequest {
  std::string method;
  std::string path;  // without the query string
  std::string body;
  std::function<std::string(const std::string&)> header;  // "" when absent
};

class Api {
 public:
  Api(Scheduler& sched, const ServerOptions& opts);
  const ServerOptions& options() const { return opts_; }
  Scheduler& scheduler() { return sched_; }

  // Checks that need only the headers, before the body is read and before
  // any work: Host (DNS rebinding), API key, content type. nullopt: go on.
  HttpRefusal check_headers(const ApiRequest& r) const;
  // Routes that answer at once without blocking (/health, /, /metrics):
  // true if r was one of them.
  bool quick(const ApiRequest& r, HttpReply& out) const;
  // Every other route. May block (tokenizing, session commands): run it off
  // the event loop. A completion that was queued returns its Generation,
  // whose request calls on_update on every change.
  struct Outcome {
    HttpReply reply;
    std::shared_ptr<Completion> gen;
  };
  Outcome handle(const ApiRequest& r, std::function<void()> on_update);

 private:
  Outcome completion(const ApiRequest& r, bool chat, std::function<void()> on_update);
  Scheduler& sched_;
  ServerOptions opts_;
  GbnfTokens gbnf_tokens_;  // the model's vocabulary, for grammars' token references
};

// Constant-time comparison for API keys.
bool constant_time_equal(const std::string& a, const std::string& b);
// Header names and media types compare case-insensitively (ASCII).
std::string ascii_lower(std::string s);
// "localhost:8080" -> "localhost", "[::1]:80" -> "[::1]".
std::string host_name_of(const std::string& host_header);
bool is_loopback_host(const std::string& name);

}  // namespace ss
