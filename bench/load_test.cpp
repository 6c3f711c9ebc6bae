// Load test: starts `sinkstream serve` on loopback, holds N concurrent
// streaming chat clients (each its own endless session) for a fixed time,
// then stops everything. Reports errors, inter-token latency percentiles and
// the server's RSS over time; exits non-zero on any error or if RSS grew
// after warm-up. Bounded by construction: loopback only, fixed client count,
// a hard deadline.
#include <httplib.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

long rss_kib(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  return -1;
}

double pct(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5))];
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"sinkstream load test (loopback only)"};
  std::string binary, model, policy = "sinks:4:252";
  int clients = 64, seconds = 60, max_tokens = 48, warmup = 10;
  app.add_option("--server", binary, "path of the sinkstream binary")->required();
  app.add_option("-m,--model", model, "model to serve")->required();
  app.add_option("--policy", policy, "KV policy")->capture_default_str();
  app.add_option("--clients", clients, "concurrent streaming clients")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  app.add_option("--seconds", seconds, "how long to hold the load")->check(CLI::Range(1, 600))->capture_default_str();
  app.add_option("--warmup", warmup, "seconds before the RSS baseline is taken")->capture_default_str();
  app.add_option("--max-tokens", max_tokens, "tokens per turn")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  int fds[2];
  if (pipe(fds) != 0) return 2;
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], 1);
    close(fds[0]);
    const std::string c = std::to_string(clients);
    execl(binary.c_str(), "sinkstream", "serve", "-m", model.c_str(), "--host", "127.0.0.1", "--port", "0", "--policy",
          policy.c_str(), "--max-batch", c.c_str(), "--max-sessions", c.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  close(fds[1]);
  std::string out;
  char ch;
  while (read(fds[0], &ch, 1) == 1) {
    out += ch;
    if (ch == '\n' && out.find("listening on port ") != std::string::npos) break;
  }
  const auto at = out.find("listening on port ");
  if (at == std::string::npos) {
    std::fprintf(stderr, "server did not start\n");
    return 2;
  }
  const int port = std::stoi(out.substr(at + 18));

  std::atomic<bool> stop{false};
  std::atomic<long> errors{0}, requests{0}, tokens{0};
  std::mutex mu;
  std::vector<double> gaps_ms;  // between consecutive content chunks of one stream
  std::vector<std::string> error_samples;
  const auto t0 = Clock::now();
  std::vector<std::thread> threads;
  for (int i = 0; i < clients; ++i) {
    threads.emplace_back([&, i] {
      httplib::Client c("127.0.0.1", port);
      c.set_read_timeout(30, 0);
      std::vector<double> mine;
      for (int turn = 0; !stop; ++turn) {
        nlohmann::json body = {
            {"messages", {{{"role", "user"}, {"content", "Tell me about day " + std::to_string(turn) + "."}}}},
            {"max_tokens", max_tokens},
            {"temperature", 0.8},
            {"seed", i * 1000 + turn},
            {"stream", true},
            {"session_id", "load-" + std::to_string(i)}};
        httplib::Request req;
        req.method = "POST";
        req.path = "/v1/chat/completions";
        req.body = body.dump();
        req.set_header("Content-Type", "application/json");
        int status = 0;
        std::string raw;
        Clock::time_point last{};
        long got = 0;
        req.response_handler = [&](const httplib::Response& r) {
          status = r.status;
          return true;
        };
        req.content_receiver = [&](const char* d, size_t n, uint64_t, uint64_t) {
          raw.append(d, n);
          if (std::string_view(d, n).find("\"content\":\"") != std::string_view::npos) {
            const auto now = Clock::now();
            if (got > 0) mine.push_back(std::chrono::duration<double, std::milli>(now - last).count());
            last = now;
            ++got;
          }
          return true;
        };
        auto res = c.send(req);
        const bool ok = res && status == 200 && raw.find("[DONE]") != std::string::npos &&
                        raw.find("\"error\"") == std::string::npos;
        if (!ok) {
          ++errors;
          std::lock_guard<std::mutex> lock(mu);
          if (error_samples.size() < 5)
            error_samples.push_back("client " + std::to_string(i) + " turn " + std::to_string(turn) + " at " +
                                    std::to_string(std::chrono::duration<double>(Clock::now() - t0).count()) +
                                    " s: status " + std::to_string(status) + " after " + std::to_string(raw.size()) +
                                    " bytes: " + (res ? raw.substr(0, 200) : httplib::to_string(res.error())));
        } else {
          ++requests;
          tokens += got;
        }
      }
      std::lock_guard<std::mutex> lock(mu);
      gaps_ms.insert(gaps_ms.end(), mine.begin(), mine.end());
    });
  }
  long rss_base = -1, rss_max = 0, rss_end = 0;
  for (int s = 1; s <= seconds; ++s) {
    std::this_thread::sleep_until(t0 + std::chrono::seconds(s));
    const long r = rss_kib(pid);
    if (s == std::min(warmup, seconds)) rss_base = r;
    rss_max = std::max(rss_max, r);
    rss_end = r;
  }
  stop = true;
  // Hard deadline: a stuck client cannot keep the test alive.
  std::thread watchdog([&] {
    std::this_thread::sleep_for(std::chrono::seconds(45));
    std::fprintf(stderr, "load test: clients did not stop within 45 s\n");
    ::kill(pid, SIGKILL);
    std::_Exit(3);
  });
  watchdog.detach();
  for (auto& t : threads) t.join();
  const double elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
  ::kill(pid, SIGTERM);
  waitpid(pid, nullptr, 0);

  const double p50 = pct(gaps_ms, 0.5), p99 = pct(gaps_ms, 0.99);
  const bool rss_flat = rss_end <= rss_base + std::max<long>(rss_base / 10, 2048);
  std::printf(
      "load test: %d clients x %d s on 127.0.0.1:%d (%s)\n"
      "  requests %ld, errors %ld, tokens %ld (%.0f tok/s aggregate)\n"
      "  inter-token latency p50 %.2f ms, p99 %.2f ms (%zu gaps)\n"
      "  server RSS: %.1f MiB after %d s warm-up, %.1f MiB at the end, %.1f MiB max -> %s\n",
      clients, seconds, port, policy.c_str(), requests.load(), errors.load(), tokens.load(),
      static_cast<double>(tokens.load()) / elapsed, p50, p99, gaps_ms.size(), rss_base / 1024.0, warmup,
      rss_end / 1024.0, rss_max / 1024.0, rss_flat ? "flat" : "GREW");
  for (const auto& e : error_samples) std::printf("  error: %s\n", e.c_str());
  return errors == 0 && rss_flat && requests > 0 ? 0 : 1;
}
