#include "server/http_server.h"

#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "server/json_text.h"
#include "server/request_parse.h"
#include "server/web_page.h"

namespace ss {

namespace {

using nlohmann::json;

json error_body(const std::string& msg, const std::string& type, const std::string& param = "") {
  return {
      {"error",
       {{"message", msg}, {"type", type}, {"param", param.empty() ? json(nullptr) : json(param)}, {"code", nullptr}}}};
}

void send_error(httplib::Response& res, int status, const std::string& msg, const std::string& param = "") {
  const std::string type = status == 401   ? "authentication_error"
                           : status == 404 ? "not_found_error"
                           : status == 429 ? "rate_limit_error"
                           : status >= 500 ? "server_error"
                                           : "invalid_request_error";
  res.status = status;
  if (status == 429 || status == 503) res.set_header("Retry-After", "1");
  res.set_content(encode_json(error_body(msg, type, param)), "application/json");
}

std::string new_id(const char* prefix) {
  static std::atomic<uint64_t> counter{0};
  static const uint64_t salt = std::random_device{}();
  std::ostringstream o;
  o << prefix << std::hex << salt << "-" << counter.fetch_add(1);
  return o.str();
}

int64_t now_s() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

bool constant_time_equal(const std::string& a, const std::string& b) {
  unsigned char diff = static_cast<unsigned char>(a.size() != b.size());
  const size_t n = std::max(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned char>(x ^ y);
  }
  return diff == 0;
}

std::string render_metrics(const SchedulerMetrics& m) {
  std::ostringstream o;
  auto metric = [&](const char* name, const char* type, const char* help, double v) {
    o << "# HELP " << name << " " << help << "\n# TYPE " << name << " " << type << "\n" << name << " " << v << "\n";
  };
  metric("sinkstream_requests_total", "counter", "Generation requests accepted.",
         static_cast<double>(m.requests_total));
  metric("sinkstream_requests_rejected_total", "counter", "Requests refused (queue or session limits).",
         static_cast<double>(m.requests_rejected));
  metric("sinkstream_tokens_in_total", "counter", "Prompt tokens prefilled.", static_cast<double>(m.tokens_in));
  metric("sinkstream_tokens_out_total", "counter", "Tokens generated.", static_cast<double>(m.tokens_out));
  metric("sinkstream_active_requests", "gauge", "Requests in the running batch.", static_cast<double>(m.active));
  metric("sinkstream_queue_depth", "gauge", "Requests waiting to join the batch.", static_cast<double>(m.queued));
  metric("sinkstream_sessions", "gauge", "Live sessions.", static_cast<double>(m.sessions));
  metric("sinkstream_kv_blocks_used", "gauge", "KV blocks in use.", static_cast<double>(m.kv_blocks_used));
  metric("sinkstream_kv_blocks_free", "gauge", "KV blocks free.",
         static_cast<double>(m.kv_blocks_total - m.kv_blocks_used));
  metric("sinkstream_persist_errors_total", "counter", "Session state writes that failed.",
         static_cast<double>(m.persist_errors));
  metric("sinkstream_session_restore_fallbacks_total", "counter",
         "Sessions restored from their previous copy because the newest file was bad.",
         static_cast<double>(m.session_fallbacks));
  metric("sinkstream_session_files_rejected_total", "counter", "Session files that could not be restored at all.",
         static_cast<double>(m.session_files_rejected));
  metric("sinkstream_session_files_discarded_total", "counter",
         "Corrupt newest session files dropped on save rather than kept as the backup.",
         static_cast<double>(m.session_files_discarded));
  o << "# HELP sinkstream_token_latency_ms Time of the batched step that produced each generated token.\n"
    << "# TYPE sinkstream_token_latency_ms histogram\n";
  for (size_t b = 0; b < m.latency_buckets_ms.size(); ++b)
    o << "sinkstream_token_latency_ms_bucket{le=\"" << m.latency_buckets_ms[b] << "\"} " << m.latency_counts[b] << "\n";
  o << "sinkstream_token_latency_ms_bucket{le=\"+Inf\"} " << m.latency_count << "\n"
    << "sinkstream_token_latency_ms_sum " << m.latency_sum_ms << "\n"
    << "sinkstream_token_latency_ms_count " << m.latency_count << "\n";
  return o.str();
}

HttpServer::HttpServer(Scheduler& sched, const ServerOptions& opts)
    : sched_(sched), opts_(opts), svr_(std::make_unique<httplib::Server>()) {
  if (opts_.model_name.empty()) {
    const std::string& src = sched_.model().source;
    opts_.model_name = src.substr(src.find_last_of('/') + 1);
  }
  // A streaming response holds its connection's thread for the whole answer:
  // size the pool for every request the scheduler may run or queue at once
  // (httplib's default is 8 threads, which would silently serialise clients).
  const int threads = std::max(8, opts_.http_threads);
  svr_->new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
  svr_->set_keep_alive_max_count(1000);
  routes();
}

HttpServer::~HttpServer() = default;

namespace {
// Debian's cpp-httplib is a prebuilt library that listens with a backlog of
// 5: a burst of new connections (many clients starting at once) then sees
// resets. listen() again on the bound socket raises the backlog; the socket
// is found as the listening one bound to our port (httplib exposes no fd).
void raise_listen_backlog(int port) {
  for (int fd = 3; fd < 4096; ++fd) {
    int listening = 0;
    socklen_t len = sizeof listening;
    if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) != 0 || !listening) continue;
    sockaddr_storage addr{};
    socklen_t alen = sizeof addr;
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &alen) != 0) continue;
    int p = -1;
    if (addr.ss_family == AF_INET) p = ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
    if (addr.ss_family == AF_INET6) p = ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port);
    if (p == port) ::listen(fd, 1024);
  }
}
}  // namespace

int HttpServer::bind() {
  const int port = opts_.port == 0 ? svr_->bind_to_any_port(opts_.host)
                                   : (svr_->bind_to_port(opts_.host, opts_.port) ? opts_.port : -1);
  if (port > 0) raise_listen_backlog(port);
  return port;
}

bool HttpServer::serve() { return svr_->listen_after_bind(); }
void HttpServer::stop() { svr_->stop(); }

void HttpServer::routes() {
  auto& s = *svr_;
  s.set_payload_max_length(opts_.max_body_bytes);
  s.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    // A NUL inside a header value would cut it where it is read as a C
    // string (an API key "Bearer k\0..." compared as "Bearer k"): refused.
    for (const auto& [name, value] : req.headers)
      if (name.find('\0') != std::string::npos || value.find('\0') != std::string::npos) {
        send_error(res, 400, "header '" + name.substr(0, name.find('\0')) + "' contains a NUL byte");
        return httplib::Server::HandlerResponse::Handled;
      }
    const bool protected_path = req.path.rfind("/v1/", 0) == 0 || req.path == "/metrics";
    if (opts_.api_key.empty() || !protected_path) return httplib::Server::HandlerResponse::Unhandled;
    const std::string auth = req.get_header_value("Authorization");
    const std::string want = "Bearer " + opts_.api_key;
    if (!constant_time_equal(auth, want)) {
      send_error(res, 401, "invalid or missing API key");
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  s.set_error_handler([](const httplib::Request&, httplib::Response& res) {
    if (!res.body.empty()) return;
    const std::string msg = res.status == 413   ? "request body too large"
                            : res.status == 404 ? "not found"
                                                : "request failed";
    send_error(res, res.status, msg);
  });
  s.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
    send_error(res, 500, "internal error");
  });

  s.Get("/",
        [](const httplib::Request&, httplib::Response& res) { res.set_content(kWebPage, "text/html; charset=utf-8"); });
  s.Get("/health", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(R"({"status":"ok"})", "application/json");
  });
  s.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(render_metrics(sched_.metrics()), "text/plain; version=0.0.4");
  });
  s.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    const json j = {
        {"object", "list"},
        {"data", {{{"id", opts_.model_name}, {"object", "model"}, {"created", 0}, {"owned_by", "sinkstream"}}}}};
    res.set_content(encode_json(j), "application/json");
  });
  auto session_json = [](const SessionInfo& i) {
    return json{{"id", i.id},
                {"object", "session"},
                {"tokens_seen", i.tokens_seen},
                {"turns", i.turns},
                {"tokens_in", i.tokens_in},
                {"tokens_out", i.tokens_out},
                {"busy", i.busy},
                {"shared_sinks", i.shared_sinks},
                {"cache",
                 {{"sinks", i.sinks},
                  {"window", i.window},
                  {"capacity_sinks", i.capacity_sinks},
                  {"capacity_window", i.capacity_window},
                  {"evicted", i.evicted}}}};
  };
  s.Get(R"(/v1/sessions/([^/]+))", [this, session_json](const httplib::Request& req, httplib::Response& res) {
    const std::string id = req.matches[1];
    if (!valid_session_id(id)) return send_error(res, 400, "invalid session id", "session_id");
    auto info = sched_.session(id);
    if (!info) return send_error(res, 404, "unknown session '" + id + "'");
    res.set_content(encode_json(session_json(*info)), "application/json");
  });
  s.Get("/v1/sessions", [this, session_json](const httplib::Request&, httplib::Response& res) {
    json arr = json::array();
    for (const auto& i : sched_.sessions()) arr.push_back(session_json(i));
    res.set_content(encode_json(json{{"object", "list"}, {"data", arr}}), "application/json");
  });
  s.Delete(R"(/v1/sessions/([^/]+))", [this](const httplib::Request& req, httplib::Response& res) {
    const std::string id = req.matches[1];
    if (!valid_session_id(id)) return send_error(res, 400, "invalid session id", "session_id");
    if (!sched_.delete_session(id)) return send_error(res, 404, "unknown session '" + id + "'");
    res.set_content(encode_json(json{{"id", id}, {"object", "session"}, {"deleted", true}}), "application/json");
  });

  auto completion = [this](bool chat) {
    return [this, chat](const httplib::Request& req, httplib::Response& res) {
      CompletionRequest cr;
      RequestError perr;
      if (!parse_completion_body(req.body, chat, opts_.max_tokens_limit, cr, perr))
        return send_error(res, 400, perr.message, perr.param);
      if (!cr.stream && cr.max_tokens < 0 && opts_.default_max_tokens > 0) cr.max_tokens = opts_.default_max_tokens;
      auto gr = std::make_shared<GenerationRequest>();
      gr->sampling = cr.sampling;
      gr->max_tokens = cr.max_tokens;
      gr->stop = cr.stop;
      const bool stream = cr.stream;
      std::string sid = cr.session_id.empty() ? req.get_header_value("X-Session-Id") : cr.session_id;
      if (!sid.empty() && !valid_session_id(sid))
        return send_error(res, 400, "session ids are 1-64 characters of [A-Za-z0-9_-]", "session_id");
      gr->session_id = sid;
      const bool first_turn = sid.empty() || !sched_.session_exists(sid);
      const Tokenizer& tok = sched_.tokenizer();
      const auto& vocab = sched_.model().vocab;
      if (chat) {
        std::vector<ChatMessage> msgs = std::move(cr.messages);
        // A session's cache already holds the conversation up to our last
        // reply: only the messages after the last assistant message are new.
        if (!first_turn) {
          size_t last_assistant = msgs.size();
          for (size_t i = 0; i < msgs.size(); ++i)
            if (msgs[i].role == "assistant") last_assistant = i;
          if (last_assistant < msgs.size())
            msgs.erase(msgs.begin(), msgs.begin() + static_cast<std::ptrdiff_t>(last_assistant) + 1);
          if (msgs.empty()) return send_error(res, 400, "no new messages after the last assistant message", "messages");
        }
        const std::string text = render_chat_turn(opts_.chat, msgs, first_turn);
        const bool add_bos = first_turn && vocab.add_bos && opts_.chat != ChatFamily::Llama3;
        gr->tokens = tok.encode(text, add_bos, opts_.chat != ChatFamily::Plain);
      } else {
        gr->tokens = tok.encode(cr.prompt, first_turn && vocab.add_bos);
      }
      if (static_cast<int64_t>(gr->tokens.size()) > opts_.max_prompt_tokens)
        return send_error(res, 400,
                          "prompt has " + std::to_string(gr->tokens.size()) + " tokens; the limit is " +
                              std::to_string(opts_.max_prompt_tokens));
      if (auto st = sched_.submit(gr); !st.ok()) {
        const int code = status_of(st.error());
        return send_error(res, code, st.error().message.substr(std::min<size_t>(5, st.error().message.size())));
      }
      const std::string id = new_id(chat ? "chatcmpl-" : "cmpl-");
      const int64_t created = now_s();
      const std::string model = opts_.model_name;
      auto usage = [gr] {
        std::lock_guard<std::mutex> lk(gr->mu);
        return json{{"prompt_tokens", gr->prompt_tokens},
                    {"completion_tokens", gr->completion_tokens},
                    {"total_tokens", gr->prompt_tokens + gr->completion_tokens}};
      };
      if (!stream) {
        std::string text;
        bool done = false;
        while (!done) text += gr->take(done, std::chrono::milliseconds(1000));
        if (gr->finish_reason == "error") return send_error(res, gr->error_status ? gr->error_status : 500, gr->error);
        json choice = {{"index", 0}, {"finish_reason", gr->finish_reason}};
        if (chat)
          choice["message"] = {{"role", "assistant"}, {"content", text}};
        else
          choice["text"] = text;
        json body = {{"id", id},
                     {"object", chat ? "chat.completion" : "text_completion"},
                     {"created", created},
                     {"model", model},
                     {"choices", json::array({choice})},
                     {"usage", usage()}};
        if (!sid.empty()) body["session_id"] = sid;
        if (!gr->persist_error.empty()) {
          body["warning"] = gr->persist_error;
          res.set_header("X-Sinkstream-Warning", gr->persist_error);
        }
        res.set_content(encode_json(body), "application/json");
        return;
      }
      // A stream starts only once the request runs, so a refusal (full KV
      // cache, queue) is still an HTTP status, not an event in a 200 stream.
      if (!gr->wait_admitted() && gr->finish_reason == "error")
        return send_error(res, gr->error_status ? gr->error_status : 500, gr->error);
      res.set_header("Cache-Control", "no-cache");
      if (!sid.empty()) res.set_header("X-Session-Id", sid);
      auto sent_role = std::make_shared<bool>(false);
      auto provide = [gr, chat, id, created, model, sid, usage, sent_role](httplib::DataSink& sink) {
        auto chunk = [&](const json& delta_or_text, const json& finish, bool with_usage) {
          json choice = {{"index", 0}, {"finish_reason", finish}};
          if (chat)
            choice["delta"] = delta_or_text;
          else
            choice["text"] = delta_or_text;
          json j = {{"id", id},
                    {"object", chat ? "chat.completion.chunk" : "text_completion"},
                    {"created", created},
                    {"model", model},
                    {"choices", json::array({choice})}};
          if (with_usage) j["usage"] = usage();
          if (with_usage && !gr->persist_error.empty()) j["warning"] = gr->persist_error;
          if (!sid.empty()) j["session_id"] = sid;
          const std::string line = "data: " + encode_json(j) + "\n\n";
          return sink.write(line.data(), line.size());
        };
        if (!*sent_role && chat) {
          *sent_role = true;
          if (!chunk(json{{"role", "assistant"}, {"content", ""}}, nullptr, false)) {
            gr->cancelled = true;
            return false;
          }
        }
        bool done = false;
        const std::string text = gr->take(done, std::chrono::milliseconds(500));
        bool ok = true;
        if (!text.empty())
          ok = chat ? chunk(json{{"content", text}}, nullptr, false) : chunk(text, nullptr, false);
        else if (!done)
          ok = sink.write(": keep-alive\n\n", 14);  // detects a client that left
        if (!ok) {
          gr->cancelled = true;
          return false;
        }
        if (done) {
          if (gr->finish_reason == "error") {
            const std::string line = "data: " + encode_json(error_body(gr->error, "server_error")) + "\n\n";
            sink.write(line.data(), line.size());
          } else {
            chunk(chat ? json::object() : json(""), gr->finish_reason, true);
          }
          sink.write("data: [DONE]\n\n", 14);
          sink.done();
        }
        return true;
      };
      res.set_chunked_content_provider(
          "text/event-stream",
          [gr, provide](size_t, httplib::DataSink& sink) {
            // Nothing thrown while streaming may reach httplib's thread (that
            // would end the process): the client gets an error event instead.
            try {
              return provide(sink);
            } catch (const std::exception& e) {
              std::fprintf(stderr, "[sinkstream] stream failed: %s\n", e.what());
            } catch (...) {
              std::fprintf(stderr, "[sinkstream] stream failed: unknown exception\n");
            }
            gr->cancelled = true;
            const std::string line =
                "data: " + encode_json(error_body("internal error while streaming", "server_error")) +
                "\n\ndata: [DONE]\n\n";
            sink.write(line.data(), line.size());
            sink.done();
            return false;
          },
          [gr](bool success) {
            std::lock_guard<std::mutex> lk(gr->mu);
            if (!success || !gr->finished) gr->cancelled = true;
          });
    };
  };
  s.Post("/v1/completions", completion(false));
  s.Post("/v1/chat/completions", completion(true));
}

}  // namespace ss
