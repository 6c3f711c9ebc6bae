// The HTTP layer as an attacker meets it, over raw sockets: every limit holds
// before authentication and under any framing; idle and slow connections
// cost nothing that /health needs; a client that leaves cancels its work,
// stream or not; stop() drains within its bound.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "runtime_helpers.h"
#include "server_fixture.h"

namespace ss {
namespace {

using Clock = std::chrono::steady_clock;

int connect_to(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

bool send_all(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    const ssize_t n = ::send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

// Reads until the peer closes or `until` appears or the timeout passes.
std::string read_some(int fd, double timeout_s, const std::string& until = "") {
  std::string out;
  const auto end = Clock::now() + std::chrono::milliseconds(static_cast<int>(timeout_s * 1000));
  char buf[4096];
  while (Clock::now() < end) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 20) <= 0) continue;
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (!until.empty() && out.find(until) != std::string::npos) break;
  }
  return out;
}

bool peer_closed(int fd, double timeout_s) {
  const auto end = Clock::now() + std::chrono::milliseconds(static_cast<int>(timeout_s * 1000));
  char buf[256];
  while (Clock::now() < end) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 20) <= 0) continue;
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return true;
  }
  return false;
}

int status_of(const std::string& response) {
  if (response.rfind("HTTP/1.1 ", 0) != 0) return 0;
  return std::stoi(response.substr(9, 3));
}

std::string post(const std::string& path, const std::string& body, const std::string& extra = "") {
  return "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n" + extra + "\r\n" + body;
}

ServerOptions small_limits() {
  ServerOptions o;
  o.api_key = "k";  // every refusal below happens before the key is checked
  o.max_body_bytes = 4096;
  o.max_header_bytes = 2048;
  o.max_header_fields = 20;
  o.header_timeout_s = 0.5;
  o.body_timeout_s = 0.5;
  return o;
}

TEST(HttpLimits, BodyLimitHoldsForChunkedAndContentLengthBeforeAuth) {
  test::TestServer srv(test::stories_gguf(), test::default_sched(), small_limits());
  // Content-Length over the limit: refused from the headers alone.
  int fd = connect_to(srv.port);
  ASSERT_TRUE(send_all(fd,
                       "POST /v1/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                       "Content-Length: 100000000\r\n\r\n"));
  EXPECT_EQ(status_of(read_some(fd, 5, "\r\n\r\n")), 413);
  ::close(fd);
  // Chunked: without the key, refused before any of the body is read; with
  // it, refused once the chunks pass the limit, not buffered to the end.
  const std::string chunk = "400\r\n" + std::string(1024, 'a') + "\r\n";
  for (const std::string auth : {"", "Authorization: Bearer k\r\n"}) {
    fd = connect_to(srv.port);
    std::string req = "POST /v1/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n" + auth +
                      "Transfer-Encoding: chunked\r\n\r\n";
    for (int i = 0; i < 8; ++i) req += chunk;  // 8 KiB, twice the limit, and no end
    send_all(fd, req);
    EXPECT_EQ(status_of(read_some(fd, 5, "\r\n\r\n")), auth.empty() ? 401 : 413);
    ::close(fd);
  }
}

TEST(HttpLimits, HeaderBytesAndFieldsAreBoundedAndNulIsRefused) {
  test::TestServer srv(test::stories_gguf(), test::default_sched(), small_limits());
  int fd = connect_to(srv.port);
  send_all(fd, "GET /health HTTP/1.1\r\nHost: localhost\r\nX-Big: " + std::string(4000, 'x') + "\r\n\r\n");
  EXPECT_EQ(status_of(read_some(fd, 5, "\r\n\r\n")), 431);
  ::close(fd);
  fd = connect_to(srv.port);
  std::string many = "GET /health HTTP/1.1\r\nHost: localhost\r\n";
  for (int i = 0; i < 30; ++i) many += "X-" + std::to_string(i) + ": v\r\n";
  send_all(fd, many + "\r\n");
  EXPECT_EQ(status_of(read_some(fd, 5, "\r\n\r\n")), 431);
  ::close(fd);
  fd = connect_to(srv.port);
  std::string nul = "GET /v1/models HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer k";
  nul += '\0';
  nul += "x\r\n\r\n";
  send_all(fd, nul);
  const int st = status_of(read_some(fd, 5, "\r\n\r\n"));
  EXPECT_EQ(st, 400);
  ::close(fd);
}

TEST(HttpLimits, ContentTypeHostAndMethodChecks) {
  test::TestServer srv(test::stories_gguf(), test::default_sched());
  auto c = srv.client();
  // The README's old `curl -d` sends a form type: refused with a clear message.
  auto r = c.Post("/v1/completions", R"({"prompt": "Once"})", "application/x-www-form-urlencoded");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 415);
  EXPECT_NE(r->body.find("application/json"), std::string::npos);
  r = c.Post("/v1/completions", R"({"prompt": "Once", "max_tokens": 2})", "application/json; charset=utf-8");
  EXPECT_EQ(r->status, 200);
  // DNS rebinding: a page at evil.example resolving to 127.0.0.1.
  int fd = connect_to(srv.port);
  send_all(fd, "GET /v1/models HTTP/1.1\r\nHost: evil.example:8080\r\n\r\n");
  EXPECT_EQ(status_of(read_some(fd, 5, "\r\n\r\n")), 403);
  ::close(fd);
  for (const std::string host : {"localhost:8080", "127.0.0.1", "[::1]:9"}) {
    fd = connect_to(srv.port);
    send_all(fd, "GET /health HTTP/1.1\r\nHost: " + host + "\r\n\r\n");
    EXPECT_EQ(status_of(read_some(fd, 5, "\r\n\r\n")), 200) << host;
    ::close(fd);
  }
  EXPECT_EQ(c.Put("/v1/completions", "{}", "application/json")->status, 405);
}

TEST(HttpLimits, PipelinedRequestsAllGetAnswersInOrder) {
  test::TestServer srv(test::stories_gguf(), test::default_sched());
  const int fd = connect_to(srv.port);
  const std::string body = R"({"prompt": "Once", "max_tokens": 3, "temperature": 0})";
  send_all(fd, "GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n" + post("/v1/completions", body) +
                   "GET /v1/models HTTP/1.1\r\nHost: localhost\r\n\r\n");
  const std::string all = read_some(fd, 10, "stories260K.gguf\",\"object\":\"model\"");
  const auto a = all.find("{\"status\":\"ok\"}"), b = all.find("text_completion"), m = all.find("\"owned_by\"");
  EXPECT_NE(a, std::string::npos) << all;
  EXPECT_NE(b, std::string::npos) << all;
  EXPECT_NE(m, std::string::npos) << all;
  EXPECT_LT(a, b);
  EXPECT_LT(b, m);
  ::close(fd);
}

TEST(HttpLimits, SlowHeadersAreCutAtTheDeadlineAndIdleConnectionsDoNotStarveHealth) {
  ServerOptions o = small_limits();
  test::TestServer srv(test::stories_gguf(), test::default_sched(), o);
  // A slowloris: a request line, then nothing.
  const int slow = connect_to(srv.port);
  send_all(slow, "GET /health HTTP/1.1\r\nHost: local");
  EXPECT_TRUE(peer_closed(slow, 3)) << "header deadline of 0.5 s not enforced";
  ::close(slow);
  // Many idle keep-alive connections and slow senders at once (as many as
  // the fd limit allows beside the server's own ends, at most 1000).
  rlimit rl{};
  getrlimit(RLIMIT_NOFILE, &rl);
  const int n = static_cast<int>(std::min<rlim_t>(1000, (rl.rlim_cur - 200) / 2));
  std::vector<int> idle;
  for (int i = 0; i < n; ++i) {
    const int fd = connect_to(srv.port);
    if (fd < 0) break;
    if (i % 2) send_all(fd, "GET /health HTTP/1.1\r\n");  // slow, not idle
    idle.push_back(fd);
  }
  EXPECT_EQ(static_cast<int>(idle.size()), n);
  auto c = srv.client();
  const auto t0 = Clock::now();
  auto h = c.Get("/health");
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
  EXPECT_LT(ms, 2000) << n << " idle connections";  // generous: a shared 2-core machine; typically < 5 ms
  for (int fd : idle) ::close(fd);
}

TEST(HttpLimits, ANonStreamClientThatLeavesCancelsItsGeneration) {
  ServerOptions o;
  o.default_max_tokens = 0;  // without max_tokens it would run until EOS
  test::TestServer srv(test::stories_gguf(), test::default_sched(), o);
  auto c = srv.client();
  const int fd = connect_to(srv.port);
  send_all(fd, post("/v1/completions", R"({"prompt": "Once upon a time", "ignore_eos": true})"));
  for (int i = 0; i < 200 && test::metric(c, "sinkstream_active_requests") < 1; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_EQ(test::metric(c, "sinkstream_active_requests"), 1);
  ::close(fd);
  int64_t active = 1;
  for (int i = 0; i < 200 && active != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    active = test::metric(c, "sinkstream_active_requests");
  }
  EXPECT_EQ(active, 0) << "a non-stream request kept running after its client left";
  EXPECT_EQ(test::metric(c, "sinkstream_requests_cancelled_total"), 1);
  EXPECT_EQ(test::metric(c, "sinkstream_kv_blocks_used"), 0);
}

TEST(HttpLimits, StopDrainsRunningStreamsWithinItsBound) {
  ServerOptions o;
  o.drain_s = 0.3;
  auto srv = std::make_unique<test::TestServer>(test::stories_gguf(), test::default_sched(), o);
  const int fd = connect_to(srv->port);
  send_all(fd, post("/v1/completions", R"({"prompt": "Once", "stream": true, "max_tokens": 100000000})"));
  ASSERT_NE(read_some(fd, 5, "data: ").find("data: "), std::string::npos);
  const auto t0 = Clock::now();
  srv->http->stop();
  srv->thread.join();
  const double s = std::chrono::duration<double>(Clock::now() - t0).count();
  EXPECT_LT(s, 0.3 + 3.5);  // drain, then the hard bound
  const std::string rest = read_some(fd, 2, "[DONE]");
  EXPECT_NE(rest.find("\"finish_reason\":\"cancelled\""), std::string::npos) << rest.substr(0, 300);
  EXPECT_NE(rest.find("data: [DONE]"), std::string::npos);
  ::close(fd);
  srv->thread = std::thread([] {});  // the fixture joins it
}

TEST(HttpLimits, ExpectContinueIsHonoured) {
  test::TestServer srv(test::stories_gguf(), test::default_sched());
  const int fd = connect_to(srv.port);
  const std::string body = R"({"prompt": "Once", "max_tokens": 2})";
  send_all(fd,
           "POST /v1/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: " +
               std::to_string(body.size()) + "\r\nExpect: 100-continue\r\n\r\n");
  EXPECT_EQ(status_of(read_some(fd, 5, "\r\n\r\n")), 100);
  send_all(fd, body);
  EXPECT_NE(read_some(fd, 5, "text_completion").find("text_completion"), std::string::npos);
  ::close(fd);
}

}  // namespace
}  // namespace ss
