#pragma once
// An in-process sinkstream server on a loopback port, for integration tests.
#include <httplib.h>

#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "server/http_server.h"
#include "test_paths.h"

namespace ss::test {

struct TestServer {
  std::unique_ptr<Scheduler> sched;
  std::unique_ptr<HttpServer> http;
  std::thread thread;
  int port = -1;

  TestServer(std::shared_ptr<const Model> model, SchedulerOptions so, ServerOptions ho = {}) {
    sched = std::make_unique<Scheduler>(model, so);
    ho.port = 0;
    http = std::make_unique<HttpServer>(*sched, ho);
    port = http->bind();
    thread = std::thread([this] { http->serve(); });
  }
  ~TestServer() {
    http->stop();
    thread.join();
    http.reset();
    sched.reset();
  }
  httplib::Client client() const {
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(60, 0);
    return c;
  }
};

inline SchedulerOptions default_sched(const std::string& state_dir = "") {
  SchedulerOptions so;
  so.policy = KvPolicy::sinks_window(4, 60);
  so.max_chunk = 16;
  so.kv_blocks = 400;
  so.state_dir = state_dir;
  return so;
}

// A counter or gauge from /metrics (-1: absent or no answer).
inline int64_t metric(httplib::Client& c, const std::string& name) {
  auto r = c.Get("/metrics");
  if (!r) return -1;
  std::istringstream in(r->body);
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(name + " ", 0) == 0) return static_cast<int64_t>(std::stod(line.substr(name.size() + 1)));
  return -1;
}

inline nlohmann::json post(httplib::Client& c, const std::string& path, const nlohmann::json& body,
                           int* status = nullptr) {
  auto r = c.Post(path, body.dump(), "application/json");
  if (!r) return nlohmann::json{{"transport_error", true}};
  if (status) *status = r->status;
  return nlohmann::json::parse(r->body, nullptr, false);
}

// The body as it came (a stream's events), empty on a transport error.
inline std::string post_raw(httplib::Client& c, const std::string& path, const nlohmann::json& body) {
  auto r = c.Post(path, body.dump(), "application/json");
  return r ? r->body : std::string();
}

// A stream's JSON chunks, in order ([DONE] left out).
inline std::vector<nlohmann::json> sse_chunks(const std::string& raw) {
  std::vector<nlohmann::json> out;
  std::istringstream in(raw);
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("data: {", 0) == 0) out.push_back(nlohmann::json::parse(line.substr(6)));
  return out;
}

}  // namespace ss::test
