#pragma once
// OpenAI-compatible HTTP API over the scheduler: /v1/models,
// /v1/completions, /v1/chat/completions (JSON or SSE streaming),
// /v1/sessions/{id}, /health, /metrics (Prometheus) and the chat page at /.
#include <memory>
#include <string>

#include "server/chat_template.h"
#include "server/scheduler.h"

namespace httplib {
class Server;
}

namespace ss {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;
  std::string api_key;
  std::string model_name;  // empty: the model file or directory name
  ChatFamily chat = ChatFamily::Plain;
  size_t max_body_bytes = 1 << 20;
  int64_t max_prompt_tokens = 1 << 16;
  int64_t max_tokens_limit = 0;  // 0: no limit (endless until EOS or stop)
  // max_tokens for a non-stream request that names none: its client sees
  // nothing until the end, so it must end (0: until EOS or a stop string).
  // Streams without max_tokens stay endless; they end when the client leaves.
  int64_t default_max_tokens = 4096;
  int http_threads = 64;  // connection threads (streams + queued requests + a margin)
};

class HttpServer {
 public:
  HttpServer(Scheduler& sched, const ServerOptions& opts);
  ~HttpServer();
  // Binds (port 0 picks a free one); returns the port or -1.
  int bind();
  // Serves until stop() (blocking).
  bool serve();
  void stop();

 private:
  void routes();
  Scheduler& sched_;
  ServerOptions opts_;
  std::unique_ptr<httplib::Server> svr_;
};

// Constant-time comparison for API keys.
bool constant_time_equal(const std::string& a, const std::string& b);
// Prometheus text exposition of the scheduler's metrics.
std::string render_metrics(const SchedulerMetrics& m);

}  // namespace ss
