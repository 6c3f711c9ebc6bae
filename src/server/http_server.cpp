#include "server/http_server.h"

#include <sys/resource.h>
#include <sys/socket.h>

#include <array>
#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <cstdio>
#include <deque>
#include <map>
#include <optional>
#include <thread>
#include <unordered_map>

namespace ss {

namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
using Clock = std::chrono::steady_clock;

std::chrono::milliseconds ms_of(double s) { return std::chrono::milliseconds(static_cast<int64_t>(s * 1000)); }

std::string header_safe(std::string v) {
  for (char& c : v)
    if (c == '\r' || c == '\n' || c == '\0') c = ' ';
  return v;
}

// Status line and headers; content_length < 0 means a chunked body.
std::string head(int status, const std::string& content_type,
                 const std::vector<std::pair<std::string, std::string>>& extra, int64_t content_length, bool keep_alive,
                 const std::string& replica) {
  std::string h = "HTTP/1.1 " + std::to_string(status) + " ";
  h += std::string(http::obsolete_reason(http::int_to_status(static_cast<unsigned>(status))));
  h += "\r\nContent-Type: " + content_type + "\r\n";
  h += content_length >= 0 ? "Content-Length: " + std::to_string(content_length) + "\r\n"
                           : std::string("Transfer-Encoding: chunked\r\n");
  h += keep_alive ? "Connection: keep-alive\r\n" : "Connection: close\r\n";
  h += "X-Content-Type-Options: nosniff\r\n";
  if (!replica.empty()) h += "X-Sinkstream-Replica: " + header_safe(replica) + "\r\n";
  for (const auto& [k, v] : extra) h += k + ": " + header_safe(v) + "\r\n";
  return h + "\r\n";
}

std::string chunk_frame(const std::string& data) {
  char size[24];
  std::snprintf(size, sizeof size, "%zx\r\n", data.size());
  return size + data + "\r\n";
}

class Connection;

}  // namespace

struct HttpServer::Impl {
  Impl(Scheduler& sched, const ServerOptions& o)
      : api(sched, o), opts(api.options()), workers(static_cast<size_t>(std::max(1, o.worker_threads))) {}

  Api api;
  const ServerOptions& opts;
  // Scheduler-thread callbacks (on_update) may outlive a connection or the
  // server: they touch neither once alive is false (checked under its mutex).
  struct Liveness {
    std::mutex mu;
    bool alive = true;
  };
  std::shared_ptr<Liveness> liveness = std::make_shared<Liveness>();
  std::mutex live_mu;
  std::unordered_map<Connection*, std::weak_ptr<Connection>> live;
  int max_connections = 0;
  std::atomic<int> connections{0};
  std::atomic<bool> draining{false};
  std::atomic<bool> stop_requested{false};
  Clock::time_point drain_deadline, hard_deadline;
  bool cancelled_all = false;
  net::thread_pool workers;
  // Destroyed first (declared last): pending handlers, and the connections
  // they hold, go while everything above still exists.
  net::io_context ioc;
  // The listener and the drain run on one strand (they touch the acceptor).
  net::strand<net::io_context::executor_type> control{net::make_strand(ioc)};
  tcp::acceptor acceptor{control};
  net::steady_timer accept_retry{control};
  net::steady_timer drain_timer{control};

  void accept();
  void begin_drain();
  void check_drain();
  template <typename Fn>
  void for_each_live(Fn fn);
};

namespace {

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(HttpServer::Impl& srv, tcp::socket s)
      : srv_(srv), stream_(std::move(s)), idle_timer_(stream_.get_executor()) {
    ++srv_.connections;
  }
  ~Connection() {
    cancel_generation();
    --srv_.connections;
    std::lock_guard<std::mutex> lk(srv_.live_mu);
    srv_.live.erase(this);
  }
  void start() { wait_for_request(); }
  auto executor() { return stream_.get_executor(); }
  // Drain: connections between requests close now; busy ones after their response.
  void close_if_idle() {
    if (idle_) close();
  }
  void close() {
    if (closed_) return;
    closed_ = true;
    cancel_generation();
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
    stream_.close();
    idle_timer_.cancel();
  }

 private:
  void wait_for_request() {
    if (closed_) return;
    if (srv_.draining) return close();
    parser_.emplace();
    parser_->header_limit(static_cast<std::uint32_t>(srv_.opts.max_header_bytes));
    parser_->body_limit(srv_.opts.max_body_bytes);
    if (buf_.size() > 0) return read_header();  // pipelined: already here
    // Idle keep-alive: a socket and a timer, no thread. The header deadline
    // starts with the request's first byte, so a slow sender cannot hold a
    // connection longer than header_timeout_s once it begins.
    idle_ = true;
    auto self = shared_from_this();
    idle_timer_.expires_after(ms_of(srv_.opts.idle_timeout_s));
    idle_timer_.async_wait([self](beast::error_code ec) {
      if (!ec) self->close();
    });
    stream_.socket().async_wait(tcp::socket::wait_read, [self](beast::error_code ec) {
      self->idle_ = false;
      self->idle_timer_.cancel();
      if (ec || self->closed_) return self->close();
      self->read_header();
    });
  }

  void read_header() {
    stream_.expires_after(ms_of(srv_.opts.header_timeout_s));
    auto self = shared_from_this();
    http::async_read_header(stream_, buf_, *parser_, [self](beast::error_code ec, size_t) { self->on_header(ec); });
  }

  void on_header(beast::error_code ec) {
    if (ec == http::error::header_limit) return refuse({431, "request headers too large"});
    // Content-Length over the limit: Beast's parser refuses it with the headers.
    if (ec == http::error::body_limit)
      return refuse({413, "request body too large (limit " + std::to_string(srv_.opts.max_body_bytes) + " bytes)"});
    if (ec == http::error::end_of_stream || ec == net::error::eof || ec == beast::error::timeout ||
        ec == net::error::connection_reset || ec == net::error::operation_aborted || closed_)
      return close();
    if (ec) return refuse({400, "malformed HTTP request: " + ec.message()});
    auto& h = parser_->get();
    keep_alive_ = h.keep_alive();
    head_only_ = h.method() == http::verb::head;
    int fields = 0;
    auto hdrs = std::make_shared<std::map<std::string, std::string>>();
    for (const auto& f : h) {
      const std::string name = ascii_lower(std::string(f.name_string()));
      const std::string value(f.value());
      // A NUL would cut the value where it is read as a C string (an API
      // key "Bearer k\0..." compared as "Bearer k").
      if (name.find('\0') != std::string::npos || value.find('\0') != std::string::npos)
        return refuse({400, "header '" + name.substr(0, name.find('\0')) + "' contains a NUL byte"});
      if (++fields > srv_.opts.max_header_fields)
        return refuse({431, "more than " + std::to_string(srv_.opts.max_header_fields) + " header fields"});
      (*hdrs)[name] = value;
    }
    req_ = ApiRequest{};
    req_.method = std::string(h.method_string());
    const std::string target(h.target());
    req_.path = target.substr(0, target.find('?'));
    req_.header = [hdrs](const std::string& name) {
      auto it = hdrs->find(ascii_lower(name));
      return it == hdrs->end() ? std::string() : it->second;
    };
    if (auto refused = srv_.api.check_headers(req_)) return refuse(*refused);
    if (ascii_lower(req_.header("Expect")) == "100-continue" && !parser_->is_done())
      queue_write("HTTP/1.1 100 Continue\r\n\r\n");
    if (parser_->is_done()) return on_body({});
    stream_.expires_after(ms_of(srv_.opts.body_timeout_s));
    auto self = shared_from_this();
    http::async_read(stream_, buf_, *parser_, [self](beast::error_code ec, size_t) { self->on_body(ec); });
  }

  void on_body(beast::error_code ec) {
    if (ec == http::error::body_limit)
      return refuse({413, "request body too large (limit " + std::to_string(srv_.opts.max_body_bytes) + " bytes)"});
    if (ec == beast::error::timeout) return refuse({408, "request body not received in time"});
    if (ec) return close();
    stream_.expires_never();
    req_.body = std::move(parser_->get().body());
    if (srv_.draining) {
      keep_alive_ = false;
      return respond(error_reply({503, "server is shutting down", "", 5}));
    }
    HttpReply quick;
    try {
      if (srv_.api.quick(req_, quick)) return respond(quick);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "[sinkstream] %s %s failed: %s\n", req_.method.c_str(), req_.path.c_str(), e.what());
      return respond(error_reply({500, "internal error"}));
    }
    // Anything that may block (tokenizing, session commands) runs on the
    // worker pool; the answer comes back to this connection's strand.
    auto self = shared_from_this();
    std::weak_ptr<Connection> weak = self;
    auto on_update = [weak, live = srv_.liveness] {
      std::lock_guard<std::mutex> lk(live->mu);
      if (!live->alive) return;
      if (auto c = weak.lock()) net::post(c->executor(), [c] { c->pump(); });
    };
    net::post(srv_.workers, [self, on_update, r = req_]() mutable {
      auto out = std::make_shared<Api::Outcome>();
      try {
        *out = self->srv_.api.handle(r, on_update);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "[sinkstream] %s %s failed: %s\n", r.method.c_str(), r.path.c_str(), e.what());
        out->reply = error_reply({500, "internal error"});
        out->gen.reset();
      }
      net::post(self->executor(), [self, out] { self->on_outcome(*out); });
    });
  }

  void on_outcome(const Api::Outcome& o) {
    if (!o.gen) return respond(o.reply);
    gen_ = o.gen;
    // The connection lives while its answer is generated, whatever else is
    // pending on it: updates reach it through a weak reference.
    hold_ = shared_from_this();
    if (closed_) return cancel_generation();
    watch_disconnect();
    pump();
  }

  // Moves what the scheduler produced to the client; runs on every update
  // and after every write (back-pressure: one write in flight at a time).
  void pump() {
    if (!gen_ || closed_) return;
    try {
      if (!gen_->stream) {
        if (auto reply = gen_->poll_final()) {
          end_generation();
          respond(*reply);
        }
        return;
      }
      if (!streaming_) {
        // A stream starts only once its requests run, so a refusal is still
        // an HTTP status, not an event inside a 200 stream.
        if (auto refused = gen_->refused()) {
          end_generation()->cancel();
          return respond(*refused);
        }
        if (!gen_->all_admitted()) return;
        streaming_ = true;
        queue_write(head(200, "text/event-stream", gen_->stream_headers(), -1, keep_alive_, srv_.opts.replica_id));
      }
      if (writing_) return;
      bool done = false;
      const std::string ev = gen_->events(done);
      if (!ev.empty()) queue_write(chunk_frame(ev));
      if (done) finish_stream("");
    } catch (const std::exception& e) {
      // Nothing thrown while answering may end the process: the client gets
      // an error (a status, or an error event in a stream) and a log line.
      std::fprintf(stderr, "[sinkstream] response failed: %s\n", e.what());
      cancel_generation();
      if (streaming_)
        finish_stream(Generation::error_events("internal error while streaming"));
      else
        respond(error_reply({500, "internal error"}));
    }
  }

  void finish_stream(const std::string& last_events) {
    if (!last_events.empty()) queue_write(chunk_frame(last_events));
    queue_write("0\r\n\r\n");
    end_generation();
    complete_after_write_ = true;
    if (!writing_) on_response_complete();
  }

  std::shared_ptr<Completion> end_generation() {
    auto g = std::move(gen_);
    gen_.reset();
    hold_.reset();  // callers run in a handler that holds the connection too
    streaming_ = false;
    return g;
  }

  void cancel_generation() {
    if (gen_) {
      gen_->cancel();
      srv_.api.scheduler().wake();
    }
    hold_.reset();
  }

  // A client that leaves while its answer is being generated (stream or
  // not) cancels it: the socket turns readable with EOF or an error.
  void watch_disconnect() {
    if (watching_) return;
    watching_ = true;
    auto self = shared_from_this();
    stream_.socket().async_wait(tcp::socket::wait_read, [self](beast::error_code ec) {
      self->watching_ = false;
      if (!self->gen_) return;
      if (ec) return self->close();
      char c;
      const ssize_t n = ::recv(self->stream_.socket().native_handle(), &c, 1, MSG_PEEK | MSG_DONTWAIT);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) return self->close();
      // Readiness without data (it happens): keep watching. n > 0: the next
      // request arrived already (pipelining); it waits its turn.
      if (n < 0) self->watch_disconnect();
    });
  }

  void refuse(const HttpError& e) {
    keep_alive_ = false;  // the rest of the request was not read
    respond(error_reply(e));
  }

  void respond(const HttpReply& r) {
    const bool keep = keep_alive_ && !srv_.draining;
    keep_alive_ = keep;
    std::string out =
        head(r.status, r.content_type, r.headers, static_cast<int64_t>(r.body.size()), keep, srv_.opts.replica_id);
    if (!head_only_) out += r.body;
    queue_write(std::move(out));
    complete_after_write_ = true;
  }

  void queue_write(std::string bytes) {
    outq_.push_back(std::move(bytes));
    if (!writing_) do_write();
  }

  void do_write() {
    if (closed_) return;
    writing_ = true;
    stream_.expires_after(ms_of(srv_.opts.write_timeout_s));
    auto self = shared_from_this();
    net::async_write(stream_, net::buffer(outq_.front()), [self](beast::error_code ec, size_t) {
      self->writing_ = false;
      if (ec) return self->close();
      self->stream_.expires_never();
      self->outq_.pop_front();
      if (!self->outq_.empty()) return self->do_write();
      if (self->gen_) return self->pump();
      if (self->complete_after_write_) self->on_response_complete();
    });
  }

  void on_response_complete() {
    if (writing_ || !outq_.empty()) return;
    complete_after_write_ = false;
    head_only_ = false;
    if (!keep_alive_ || srv_.draining) return linger_close();
    wait_for_request();
  }

  // A close with unread input (the rest of a refused body) makes the kernel
  // send a reset, and the client may lose the answer it has not read yet:
  // stop sending, then read and discard for a moment (as nginx's lingering
  // close does), bounded in time and bytes.
  void linger_close() {
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
    if (ec) return close();
    stream_.expires_after(std::chrono::seconds(2));
    linger(std::make_shared<std::array<char, 16384>>(), 4 << 20);
  }
  void linger(std::shared_ptr<std::array<char, 16384>> buf, size_t left) {
    auto self = shared_from_this();
    stream_.async_read_some(net::buffer(*buf), [self, buf, left](beast::error_code ec, size_t n) {
      if (ec || n >= left) return self->close();
      self->linger(buf, left - n);
    });
  }

  HttpServer::Impl& srv_;
  beast::tcp_stream stream_;
  beast::flat_buffer buf_;
  std::optional<http::request_parser<http::string_body>> parser_;
  net::steady_timer idle_timer_;
  ApiRequest req_;
  bool idle_ = false, closed_ = false, keep_alive_ = true, head_only_ = false;
  std::shared_ptr<Completion> gen_;
  std::shared_ptr<Connection> hold_;  // self, while gen_ runs
  bool streaming_ = false, watching_ = false;
  std::deque<std::string> outq_;
  bool writing_ = false, complete_after_write_ = false;
};

}  // namespace

template <typename Fn>
void HttpServer::Impl::for_each_live(Fn fn) {
  std::vector<std::shared_ptr<Connection>> all;
  {
    std::lock_guard<std::mutex> lk(live_mu);
    for (auto& [p, w] : live)
      if (auto c = w.lock()) all.push_back(std::move(c));
  }
  for (auto& c : all) net::post(c->executor(), [c, fn] { fn(*c); });
}

void HttpServer::Impl::accept() {
  acceptor.async_accept(net::make_strand(ioc), [this](beast::error_code ec, tcp::socket socket) {
    if (!acceptor.is_open()) return;
    if (ec) {
      // Out of file descriptors (or a transient error): the connection stays
      // in the backlog; try again shortly instead of spinning.
      accept_retry.expires_after(std::chrono::milliseconds(100));
      accept_retry.async_wait([this](beast::error_code e) {
        if (!e) accept();
      });
      return;
    }
    if (connections.load() >= max_connections) {
      beast::error_code ignore;
      socket.close(ignore);
    } else {
      auto c = std::make_shared<Connection>(*this, std::move(socket));
      {
        std::lock_guard<std::mutex> lk(live_mu);
        live[c.get()] = c;
      }
      c->start();
    }
    accept();
  });
}

void HttpServer::Impl::begin_drain() {
  if (draining.exchange(true)) return;
  beast::error_code ec;
  acceptor.close(ec);
  accept_retry.cancel();
  for_each_live([](Connection& c) { c.close_if_idle(); });
  drain_deadline = Clock::now() + ms_of(opts.drain_s);
  hard_deadline = drain_deadline + std::chrono::seconds(3);
  check_drain();
}

void HttpServer::Impl::check_drain() {
  if (connections.load() == 0) return ioc.stop();
  const auto now = Clock::now();
  if (now >= hard_deadline) {
    for_each_live([](Connection& c) { c.close(); });
    return ioc.stop();
  }
  if (now >= drain_deadline && !cancelled_all) {
    cancelled_all = true;
    // Streams end with finish_reason "cancelled" and [DONE]; non-stream
    // requests answer with what they have.
    net::post(workers, [this] {
      const int n = api.scheduler().cancel_all();
      if (n > 0) std::fprintf(stderr, "[sinkstream] drain: cancelled %d running requests\n", n);
    });
  }
  drain_timer.expires_after(std::chrono::milliseconds(20));
  drain_timer.async_wait([this](beast::error_code e) {
    if (!e) check_drain();
  });
}

HttpServer::HttpServer(Scheduler& sched, const ServerOptions& opts) : impl_(std::make_unique<Impl>(sched, opts)) {}

HttpServer::~HttpServer() {
  impl_->ioc.stop();
  impl_->workers.join();
  std::lock_guard<std::mutex> lk(impl_->liveness->mu);
  impl_->liveness->alive = false;
}

int HttpServer::bind() {
  Impl& s = *impl_;
  // Every connection is a file descriptor: use what the system allows.
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
    getrlimit(RLIMIT_NOFILE, &rl);
  }
  const int64_t fd_room = static_cast<int64_t>(rl.rlim_cur) - 64;
  s.max_connections = static_cast<int>(std::max<int64_t>(16, std::min<int64_t>(s.opts.max_connections, fd_room)));
  beast::error_code ec;
  tcp::resolver resolver(s.ioc);
  auto results = resolver.resolve(s.opts.host, std::to_string(s.opts.port), tcp::resolver::passive, ec);
  if (ec || results.empty()) return -1;
  const tcp::endpoint ep = results.begin()->endpoint();
  s.acceptor.open(ep.protocol(), ec);
  if (ec) return -1;
  s.acceptor.set_option(net::socket_base::reuse_address(true), ec);
  s.acceptor.bind(ep, ec);
  if (ec) return -1;
  s.acceptor.listen(1024, ec);
  if (ec) return -1;
  return s.acceptor.local_endpoint().port();
}

bool HttpServer::serve() {
  Impl& s = *impl_;
  if (!s.acceptor.is_open()) return false;
  net::post(s.control, [&s] { s.accept(); });
  if (s.stop_requested) net::post(s.control, [&s] { s.begin_drain(); });
  std::vector<std::thread> threads;
  for (int i = 1; i < std::max(1, s.opts.io_threads); ++i) threads.emplace_back([&s] { s.ioc.run(); });
  s.ioc.run();
  for (auto& t : threads) t.join();
  return true;
}

void HttpServer::stop() {
  impl_->stop_requested = true;
  net::post(impl_->control, [s = impl_.get()] { s->begin_drain(); });
}

}  // namespace ss
