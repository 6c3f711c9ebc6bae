#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <thread>

#include "cli/commands.h"
#include "server/http_server.h"

namespace ss::cli {

ServeCommand::ServeCommand(CLI::App& app) {
  sub_ = Flags::subcommand(app, "serve", "OpenAI-compatible server with endless sessions and continuous batching");
  model_.add(sub_);
  policy_.chunk = 64;  // a prompt's step holds up every other stream's next token
  policy_.add(sub_, false);
  sub_.add("--host", host_, "address to bind").show_default();
  sub_.add("--port", port_, "port (0: any free port, printed on start)").range(0, 65535).show_default();
  sub_.add("--api-key", api_key_, "require 'Authorization: Bearer KEY' on /v1/*");
  sub_.add("--max-sessions", max_sessions_, "most sessions kept (idle ones leave the KV pool for disk under pressure)")
      .positive()
      .show_default();
  sub_.add("--max-batch", max_batch_, "most requests per batched step").positive().show_default();
  sub_.add("--max-queue", max_queue_, "most waiting requests (more get 429)").positive().show_default();
  sub_.add("--kv-blocks", kv_blocks_, "KV pool size in blocks (default: 64 sequences' worth)");
  sub_.add("--state-dir", state_dir_, "persist sessions here after every turn; restored on start");
  sub_.add("--replica-id", replica_id_,
           "this replica's name in the X-Sinkstream-Replica header of every response (default: host:port)");
  sub_.flag("--shared-state", shared_state_,
            "replicas share --state-dir (a directory on shared storage): each session turn takes a lease there, "
            "reloads the session when another replica served its last turn, and never overwrites a newer save "
            "(docs/SCALING.md)");
  sub_.add("--lease-wait", lease_wait_, "seconds a turn waits for its session's lease (then 409)")
      .non_negative()
      .show_default();
  sub_.add("--spill-dir", spill_dir_,
           "without --state-dir: where idle sessions go when the KV pool is needed (default: a private "
           "temporary directory, removed at exit)");
  sub_.add("--max-connections", max_connections_, "most open connections (more are closed at accept)")
      .positive()
      .show_default();
  sub_.add("--header-timeout", header_timeout_, "seconds from a request's first byte to its last header")
      .positive()
      .show_default();
  sub_.add("--idle-timeout", idle_timeout_, "seconds a keep-alive connection may wait between requests")
      .positive()
      .show_default();
  sub_.add("--drain-timeout", drain_,
           "on SIGTERM/SIGINT: seconds running requests may finish before they are cancelled")
      .non_negative()
      .show_default();
  sub_.add("--allowed-host", allowed_hosts_,
           "a Host name accepted besides localhost/127.0.0.1/[::1] while bound to loopback (repeatable; "
           "other names are refused against DNS rebinding)");
  sub_.add("--chat-template", chat_template_, std::string("force a chat format: ") + chat_family_names());
  sub_.add("--max-body", max_body_, "largest request body in bytes").show_default();
  sub_.add("--max-prompt-tokens", max_prompt_tokens_, "largest prompt in tokens").show_default();
  sub_.add("--max-tokens-limit", max_tokens_limit_, "cap on max_tokens per request (0: none)").show_default();
  sub_.add("--default-max-tokens", default_max_tokens_,
           "max_tokens of a non-stream request that sets none (0: until EOS or stop; streams without "
           "max_tokens are endless and end when the client disconnects)")
      .range(0LL, 1LL << 40)
      .show_default();
}

int ServeCommand::run() {
  // SIGINT/SIGTERM are taken by one thread with sigwait (blocked here, before
  // any thread starts, so every thread inherits the mask): a signal that
  // lands before the accept loop runs is not lost, and no handler runs
  // non-async-signal-safe code.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);
  auto model_r = model_.load();
  if (!model_r.ok()) return fail(model_r.error().message);
  const auto model = model_r.value();
  auto pols = policy_.resolve(model->config.trained_context);
  if (!pols.ok()) return fail(pols.error().message);
  // h2o keeps per-head caches that sessions cannot persist or share.
  if (pols.value()[0].recompute() || !pols.value()[0].policy.bounded() || pols.value()[0].policy.h2o())
    return fail("serve needs a streaming policy (sinks:S:W or window:W)");
  ServerOptions so;
  so.host = host_;
  so.port = port_;
  so.api_key = api_key_;
  so.max_body_bytes = max_body_;
  so.max_prompt_tokens = max_prompt_tokens_;
  so.max_tokens_limit = max_tokens_limit_;
  so.default_max_tokens = default_max_tokens_;
  so.max_connections = max_connections_;
  so.header_timeout_s = header_timeout_;
  so.idle_timeout_s = idle_timeout_;
  so.drain_s = drain_;
  so.allowed_hosts = allowed_hosts_;
  so.model_name = model->source.substr(model->source.find_last_of('/') + 1);
  if (!chat_template_.empty()) {
    auto f = chat_family_from_name(chat_template_);
    if (!f) return fail("unknown chat template '" + chat_template_ + "' (" + chat_family_names() + ")");
    so.chat = *f;
  } else {
    so.chat = detect_chat_family(model->vocab.chat_template);
  }
  so.chat_defaults = chat_template_defaults(model->vocab.chat_template);
  if (shared_state_ && state_dir_.empty()) return fail("--shared-state needs --state-dir (the shared directory)");
  so.shared_store = shared_state_;
  so.lease_wait_s = lease_wait_;
  so.replica_id = replica_id_;
  if (so.replica_id.empty()) {
    char h[256] = {0};
    gethostname(h, sizeof h - 1);
    so.replica_id = std::string(h) + ":" + (port_ > 0 ? std::to_string(port_) : "pid" + std::to_string(getpid()));
  }
  if (!state_dir_.empty()) {
    struct stat st {};
    if (stat(state_dir_.c_str(), &st) != 0 && mkdir(state_dir_.c_str(), 0700) != 0)
      return fail(state_dir_ + ": cannot create");
  }
  if (!is_loopback_host(host_) && api_key_.empty())
    std::fprintf(stderr, "warning: serving on %s without --api-key: anyone who can reach it can use it\n",
                 host_.c_str());
  auto eo = engine_options(model_, policy_, model->config);
  if (!eo.ok()) return fail(eo.error().message);
  SchedulerOptions sopts;
  sopts.policy = pols.value()[0].policy;
  sopts.kv_type = eo->kv_type;
  sopts.threads = model_.threads;
  sopts.act_quant = model_.activation_quant();
  sopts.kv_blocks = kv_blocks_;
  sopts.max_chunk = policy_.chunk;
  sopts.sink_logit = policy_.sink_logit;
  sopts.max_batch = max_batch_;
  sopts.max_queue = max_queue_;
  sopts.max_sessions = max_sessions_;
  sopts.state_dir = state_dir_;
  sopts.spill_dir = spill_dir_;
  sopts.shared_store = shared_state_;
  Scheduler sched(model, sopts);
  for (const auto& line : sched.startup_log()) std::fprintf(stderr, "[sinkstream] %s\n", line.c_str());
  HttpServer server(sched, so);
  const int port = server.bind();
  if (port < 0) return fail("cannot bind " + host_ + ":" + std::to_string(port_));
  std::atomic<bool> served{false};
  std::thread stopper([&] {
    int sig = 0;
    sigwait(&stop_signals, &sig);
    if (served) return;  // woken by serve() returning, not by a signal
    std::fprintf(stderr, "[sinkstream] signal %d: draining (up to %.0f s), then exiting\n", sig, drain_);
    server.stop();
  });
  std::fprintf(stderr, "[sinkstream] serving %s on http://%s:%d (policy %s, chat %s, replica %s%s)\n",
               so.model_name.c_str(), host_.c_str(), port, sopts.policy.name().c_str(), chat_family_name(so.chat),
               so.replica_id.c_str(), shared_state_ ? ", shared state" : "");
  std::printf("listening on port %d\n", port);
  std::fflush(stdout);
  server.serve();
  served = true;
  pthread_kill(stopper.native_handle(), SIGTERM);  // wakes the stopper if no signal came
  stopper.join();
  return 0;
}

}  // namespace ss::cli
