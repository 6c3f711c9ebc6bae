// sinkstream serve end to end over loopback HTTP: OpenAI endpoints (JSON and
// SSE), endless sessions, restart with --state-dir, disconnects, concurrency,
// and bad requests.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>

#include "runtime_helpers.h"
#include "server_fixture.h"

namespace ss {
namespace {

using nlohmann::json;

json chat_body(const std::string& msg, int max_tokens, const std::string& session = "") {
  json b = {{"messages", {{{"role", "user"}, {"content", msg}}}}, {"max_tokens", max_tokens}, {"temperature", 0}};
  if (!session.empty()) b["session_id"] = session;
  return b;
}

TEST(Server, ModelsHealthAndCompletions) {
  test::TestServer srv(test::stories_gguf(), test::default_sched());
  auto c = srv.client();
  auto h = c.Get("/health");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
  auto m = json::parse(c.Get("/v1/models")->body);
  EXPECT_EQ(m["data"][0]["id"], "stories260K.gguf");
  int status = 0;
  auto r = test::post(c, "/v1/completions", {{"prompt", "Once upon a time"}, {"max_tokens", 20}, {"temperature", 0}},
                      &status);
  EXPECT_EQ(status, 200);
  EXPECT_EQ(r["object"], "text_completion");
  EXPECT_EQ(r["usage"]["completion_tokens"], 20);
  EXPECT_EQ(r["choices"][0]["finish_reason"], "length");
  // Same as the CLI's greedy continuation.
  EXPECT_EQ(r["choices"][0]["text"].get<std::string>().rfind(", there was a little girl named Lily.", 0), 0u);
  auto page = c.Get("/");
  ASSERT_TRUE(page);
  EXPECT_NE(page->body.find("<html"), std::string::npos);
}

TEST(Server, StreamsServerSentEvents) {
  test::TestServer srv(test::stories_gguf(), test::default_sched());
  auto c = srv.client();
  json body = chat_body("Lily had a cat.", 12);
  body["stream"] = true;
  std::string raw;
  auto r = c.Post("/v1/chat/completions", httplib::Headers{}, body.dump(), "application/json");
  ASSERT_TRUE(r);
  raw = r->body;
  EXPECT_EQ(r->get_header_value("Content-Type"), "text/event-stream");
  std::istringstream in(raw);
  std::string line, text;
  int chunks = 0;
  bool done = false;
  json last;
  while (std::getline(in, line)) {
    if (line.rfind("data: ", 0) != 0) continue;
    const std::string data = line.substr(6);
    if (data == "[DONE]") {
      done = true;
      continue;
    }
    last = json::parse(data);
    ++chunks;
    if (last["choices"][0]["delta"].contains("content"))
      text += last["choices"][0]["delta"]["content"].get<std::string>();
  }
  EXPECT_TRUE(done);
  EXPECT_GE(chunks, 3);
  EXPECT_EQ(last["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(last["usage"]["completion_tokens"], 12);
  // Streaming and non-streaming give the same greedy text.
  auto nonstream = test::post(c, "/v1/chat/completions", chat_body("Lily had a cat.", 12));
  EXPECT_EQ(text, nonstream["choices"][0]["message"]["content"].get<std::string>());
}

// stories260K samples its byte tokens at temperature 2, so its text is not
// always UTF-8, and a stop string makes the stream hold bytes back: the
// server used to die on such output (json::dump threw in the stream writer)
// or answer 500. Now every answer arrives, invalid bytes as U+FFFD, and the
// stream carries exactly the non-stream text.
TEST(Server, ModelOutputThatIsNotUtf8NeverCrashesOrLosesTheAnswer) {
  test::TestServer srv(test::stories_gguf(), test::default_sched());
  auto c = srv.client();
  int replaced = 0;
  for (int seed = 1; seed <= 24; ++seed) {
    json body = {
        {"prompt", "Once"}, {"max_tokens", 300}, {"temperature", 2.0}, {"seed", seed}, {"stop", {"qqqqqq", "zzzzz"}}};
    int status = 0;
    auto whole = test::post(c, "/v1/completions", body, &status);
    ASSERT_EQ(status, 200) << "seed " << seed;
    const std::string want = whole["choices"][0]["text"].get<std::string>();
    body["stream"] = true;
    auto r = c.Post("/v1/completions", body.dump(), "application/json");
    ASSERT_TRUE(r) << "seed " << seed << ": the server dropped the stream";
    std::istringstream in(r->body);
    std::string line, text;
    bool done = false;
    while (std::getline(in, line)) {
      if (line.rfind("data: ", 0) != 0) continue;
      if (line == "data: [DONE]") {
        done = true;
        continue;
      }
      const json j = json::parse(line.substr(6), nullptr, false);
      ASSERT_FALSE(j.is_discarded()) << line;
      ASSERT_FALSE(j.contains("error")) << line;
      text += j["choices"][0]["text"].get<std::string>();
    }
    EXPECT_TRUE(done) << "seed " << seed;
    EXPECT_EQ(text, want) << "seed " << seed;
    replaced += want.find("\xEF\xBF\xBD") != std::string::npos;
  }
  EXPECT_GT(replaced, 0) << "no sample produced invalid UTF-8: the test no longer exercises it";
  EXPECT_EQ(c.Get("/health")->status, 200);
}

TEST(Server, FiftyTurnSessionPrefillsOnlyNewTokens) {
  test::TestServer srv(test::stories_gguf(), test::default_sched());
  auto c = srv.client();
  const Tokenizer tok(test::stories_gguf()->vocab);
  int64_t prompt_total = 0;
  for (int turn = 0; turn < 50; ++turn) {
    const std::string msg = "Turn " + std::to_string(turn) + ": the dog ran to the park and played with a ball.";
    auto r = test::post(c, "/v1/chat/completions", chat_body(msg, 8, "long"));
    ASSERT_EQ(r["usage"]["completion_tokens"], 8) << turn;
    // New tokens only: the message ("\n" + text after the first turn), plus
    // the previous turn's last sampled token.
    const auto expect = turn == 0 ? tok.encode(msg, true).size() : tok.encode("\n" + msg, false).size() + 1;
    EXPECT_EQ(r["usage"]["prompt_tokens"].get<size_t>(), expect) << turn;
    prompt_total += r["usage"]["prompt_tokens"].get<int64_t>();
  }
  auto s = json::parse(c.Get("/v1/sessions/long")->body);
  EXPECT_EQ(s["turns"], 50);
  // Each turn feeds its prompt and 7 of its 8 sampled tokens (the last one is
  // fed with the next turn's prompt).
  EXPECT_EQ(s["tokens_seen"].get<int64_t>(), prompt_total + 50 * 7);
  EXPECT_GT(s["tokens_seen"].get<int64_t>(), 10 * 64);  // far past the 4+60 cache
  EXPECT_EQ(s["cache"]["sinks"], 4);
  EXPECT_EQ(s["cache"]["window"], 60);
  EXPECT_GT(s["cache"]["evicted"].get<int64_t>(), 0);
  auto del = c.Delete("/v1/sessions/long");
  ASSERT_TRUE(del);
  EXPECT_EQ(del->status, 200);
  EXPECT_EQ(c.Get("/v1/sessions/long")->status, 404);
}

std::vector<std::string> run_turns(test::TestServer& srv, const std::string& sid, int from, int to) {
  auto c = srv.client();
  std::vector<std::string> out;
  for (int t = from; t < to; ++t) {
    auto r =
        test::post(c, "/v1/chat/completions", chat_body("Tom saw a bird number " + std::to_string(t) + ".", 15, sid));
    if (!r.contains("choices")) {
      ADD_FAILURE() << "turn " << t << ": " << r.dump();
      break;
    }
    out.push_back(r["choices"][0]["message"]["content"].get<std::string>());
  }
  return out;
}

TEST(Server, RestartWithStateDirContinuesIdentically) {
  const std::string dir = test::temp_path("state");
  std::filesystem::create_directories(dir);
  std::vector<std::string> without_restart, with_restart;
  {
    test::TestServer a(test::stories_gguf(), test::default_sched());
    without_restart = run_turns(a, "keep", 0, 6);
  }
  {
    test::TestServer b(test::stories_gguf(), test::default_sched(dir));
    with_restart = run_turns(b, "keep", 0, 3);
  }
  {
    test::TestServer c(test::stories_gguf(), test::default_sched(dir));  // restart: restores from disk
    auto cl = c.client();
    auto s = json::parse(cl.Get("/v1/sessions/keep")->body);
    EXPECT_EQ(s["turns"], 3);
    const auto rest = run_turns(c, "keep", 3, 6);
    with_restart.insert(with_restart.end(), rest.begin(), rest.end());
  }
  EXPECT_EQ(with_restart, without_restart);
  std::filesystem::remove_all(dir);
}

// A running server sweeps unfinished saves too, not only at its start (a
// replica beside it killed mid-write): here after every save, and only
// those older than an hour.
TEST(Server, RunningServerSweepsStaleSaveTemporaries) {
  const std::string dir = test::temp_path("sweep");
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  {
    SchedulerOptions so = test::default_sched(dir);
    so.stale_sweep_every = std::chrono::seconds(0);
    test::TestServer a(test::stories_gguf(), so);
    // Left after the start's own sweep, as by a replica killed meanwhile.
    const std::string stale = session_path(dir, "other") + ".part.77.0";
    const std::string fresh = session_path(dir, "other") + ".part.77.1";
    for (const auto& p : {stale, fresh}) std::ofstream(p) << "x";
    std::filesystem::last_write_time(stale, std::filesystem::file_time_type::clock::now() - std::chrono::hours(2));
    run_turns(a, "mine", 0, 1);
    // The sweep runs just after the reply is sent: wait for it, bounded.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (std::filesystem::exists(stale) && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    EXPECT_FALSE(std::filesystem::exists(stale));
    EXPECT_TRUE(std::filesystem::exists(fresh));  // may be a save in progress
    EXPECT_TRUE(std::filesystem::exists(session_path(dir, "mine")));
  }
  std::filesystem::remove_all(dir);
}

// Two replicas sharing a state directory (--shared-state), turns
// alternating between them: each replica notices the other moved the
// session on and continues from the store, so the conversation equals one
// server's. Every response names its replica; a retried turn (same
// Idempotency-Key) gets the saved reply instead of running again.
TEST(Server, ReplicasSharingAStoreContinueEachOthersSessions) {
  const std::string dir = test::temp_path("fleet");
  std::filesystem::create_directories(dir);
  std::vector<std::string> single;
  {
    test::TestServer a(test::stories_gguf(), test::default_sched());
    single = run_turns(a, "shared", 0, 6);
  }
  auto shared = [&] {
    SchedulerOptions so = test::default_sched(dir);
    so.shared_store = true;
    return so;
  };
  auto named = [](const std::string& id) {
    ServerOptions ho;
    ho.replica_id = id;
    ho.shared_store = true;
    return ho;
  };
  test::TestServer r1(test::stories_gguf(), shared(), named("r1"));
  test::TestServer r2(test::stories_gguf(), shared(), named("r2"));
  std::vector<std::string> fleet;
  for (int t = 0; t < 6; ++t) {
    const auto got = run_turns(t % 3 == 0 ? r1 : r2, "shared", t, t + 1);  // r1, r2, r2, r1, r2, r2
    fleet.insert(fleet.end(), got.begin(), got.end());
  }
  EXPECT_EQ(fleet, single);
  auto c1 = r1.client();
  EXPECT_GE(test::metric(c1, "sinkstream_store_reloads_total"), 1);
  auto h = c1.Get("/health");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->get_header_value("X-Sinkstream-Replica"), "r1");
  // Idempotency: the same key twice runs one turn; the second answer is the saved one.
  auto c2 = r2.client();
  const json body = chat_body("Tom saw a bird number 6.", 15, "shared");
  const httplib::Headers key = {{"Idempotency-Key", "shared-turn-6"}};
  auto first = c2.Post("/v1/chat/completions", key, body.dump(), "application/json");
  auto again = c1.Post("/v1/chat/completions", key, body.dump(), "application/json");
  ASSERT_TRUE(first && again);
  EXPECT_EQ(again->get_header_value("X-Sinkstream-Replayed"), "true");
  EXPECT_EQ(json::parse(again->body)["choices"][0]["message"]["content"],
            json::parse(first->body)["choices"][0]["message"]["content"]);
  EXPECT_EQ(json::parse(c1.Get("/v1/sessions/shared")->body)["turns"], 7);
  std::filesystem::remove_all(dir);
}

// Models with sliding-window layers persist their own window too (session
// file v2): gemma3 and gpt-oss continue across a restart as without one,
// past both the sliding window (8) and the full layers' window (60).
TEST(Server, SlidingLayerModelsRestartWithStateDirContinueIdentically) {
  for (const char* arch : {"gemma3", "gpt-oss"}) {
    const auto model = test::model_at("golden/arch/" + std::string(arch) + "/model.gguf");
    ASSERT_TRUE(model);
    const std::string dir = test::temp_path(std::string("state_") + arch);
    std::filesystem::create_directories(dir);
    std::vector<std::string> without_restart, with_restart;
    {
      test::TestServer a(model, test::default_sched());
      without_restart = run_turns(a, "swa", 0, 6);
    }
    {
      test::TestServer b(model, test::default_sched(dir));
      with_restart = run_turns(b, "swa", 0, 3);
    }
    {
      test::TestServer c(model, test::default_sched(dir));
      const auto rest = run_turns(c, "swa", 3, 6);
      with_restart.insert(with_restart.end(), rest.begin(), rest.end());
    }
    EXPECT_EQ(with_restart, without_restart) << arch;
    ASSERT_EQ(without_restart.size(), 6u) << arch;
    std::filesystem::remove_all(dir);
  }
}

// A quantized cache persists its own bytes: a q8_0 server continues across
// a restart exactly as without one; a server restarted with another KV type
// still restores the session (its rows converted).
TEST(Server, QuantizedKvRestartContinuesIdenticallyAndLoadsIntoOtherTypes) {
  const std::string dir = test::temp_path("state_q8");
  std::filesystem::create_directories(dir);
  auto sched = [&](const std::string& d, GgmlType t) {
    auto so = test::default_sched(d);
    so.kv_type = t;
    return so;
  };
  std::vector<std::string> without_restart, with_restart;
  {
    test::TestServer a(test::stories_gguf(), sched("", GgmlType::Q8_0));
    without_restart = run_turns(a, "q8", 0, 6);
  }
  {
    test::TestServer b(test::stories_gguf(), sched(dir, GgmlType::Q8_0));
    with_restart = run_turns(b, "q8", 0, 3);
  }
  {
    test::TestServer c(test::stories_gguf(), sched(dir, GgmlType::Q8_0));
    const auto rest = run_turns(c, "q8", 3, 6);
    with_restart.insert(with_restart.end(), rest.begin(), rest.end());
  }
  EXPECT_EQ(with_restart, without_restart);
  {
    test::TestServer d(test::stories_gguf(), sched(dir, GgmlType::F16));
    auto cl = d.client();
    auto s = json::parse(cl.Get("/v1/sessions/q8")->body);
    EXPECT_EQ(s["turns"], 6);
    EXPECT_EQ(run_turns(d, "q8", 6, 7).size(), 1u);
  }
  std::filesystem::remove_all(dir);
}

TEST(Server, DisconnectMidStreamFreesBlocks) {
  test::TestServer srv(test::stories_gguf(), test::default_sched());
  auto c = srv.client();
  const int64_t baseline = test::metric(c, "sinkstream_kv_blocks_used");
  json body = {
      {"prompt", "Once upon a time"}, {"stream", true}, {"temperature", 0.8}, {"seed", 1}, {"max_tokens", 100000}};
  int received = 0;
  {
    httplib::Client streamer("127.0.0.1", srv.port);  // closed at the end of this scope
    httplib::Request req;
    req.method = "POST";
    req.path = "/v1/completions";
    req.body = body.dump();
    req.set_header("Content-Type", "application/json");
    req.content_receiver = [&](const char*, size_t, uint64_t, uint64_t) {
      return ++received < 5;
    };  // hang up after 5 chunks
    (void)streamer.send(req);
  }
  EXPECT_GE(received, 5);
  int64_t used = -1;
  for (int i = 0; i < 100; ++i) {
    used = test::metric(c, "sinkstream_kv_blocks_used");
    if (used == baseline && test::metric(c, "sinkstream_active_requests") == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(used, baseline);
}

TEST(Server, SixteenConcurrentStreamsMatchSingleStreams) {
  test::TestServer srv(test::stories_gguf(), test::default_sched());
  std::vector<std::string> single(16), concurrent(16);
  auto prompt = [](int i) { return "Story " + std::to_string(i) + ": a little bird"; };
  {
    auto c = srv.client();
    for (int i = 0; i < 16; ++i)
      single[i] = test::post(c, "/v1/completions",
                             {{"prompt", prompt(i)}, {"max_tokens", 40}, {"temperature", 0}})["choices"][0]["text"];
  }
  std::vector<std::thread> ts;
  for (int i = 0; i < 16; ++i)
    ts.emplace_back([&, i] {
      auto c = srv.client();
      json body = {{"prompt", prompt(i)}, {"max_tokens", 40}, {"temperature", 0}, {"stream", true}};
      auto r = c.Post("/v1/completions", httplib::Headers{}, body.dump(), "application/json");
      if (!r) return;
      std::istringstream in(r->body);
      std::string line;
      while (std::getline(in, line))
        if (line.rfind("data: {", 0) == 0)
          concurrent[i] += json::parse(line.substr(6))["choices"][0]["text"].get<std::string>();
    });
  for (auto& t : ts) t.join();
  for (int i = 0; i < 16; ++i) EXPECT_EQ(concurrent[i], single[i]) << i;
}

TEST(Server, SessionsWithTheSameStartShareSinkBlocks) {
  test::TestServer srv(test::stories_gguf(), test::default_sched());
  auto c = srv.client();
  test::post(c, "/v1/chat/completions", chat_body("You are a storyteller. Tell me about a cat.", 4, "a"));
  const int64_t after_one = test::metric(c, "sinkstream_kv_blocks_used");
  test::post(c, "/v1/chat/completions", chat_body("You are a storyteller. Tell me about a dog.", 4, "b"));
  const int64_t after_two = test::metric(c, "sinkstream_kv_blocks_used");
  auto b = json::parse(c.Get("/v1/sessions/b")->body);
  EXPECT_TRUE(b["shared_sinks"].get<bool>());
  auto a = json::parse(c.Get("/v1/sessions/a")->body);
  EXPECT_FALSE(a["shared_sinks"].get<bool>());
  // Session b holds window blocks only; the sink block is a's.
  EXPECT_EQ(after_two - after_one, after_one - 1 - 0 /* a: 1 sink + window blocks; registry adds no block */);
}

TEST(Server, BadRequestsGetJsonErrorsAndServingContinues) {
  ServerOptions so;
  so.max_body_bytes = 4096;
  test::TestServer srv(test::stories_gguf(), test::default_sched(), so);
  auto c = srv.client();
  struct Case {
    std::string path, body;
    int status;
  };
  const std::vector<Case> cases = {
      {"/v1/completions", "{not json", 400},
      {"/v1/completions", R"({"prompt": 5})", 400},
      {"/v1/completions", R"({"prompt": "x", "max_tokens": -1})", 400},
      {"/v1/completions", R"({"prompt": "x", "temperature": "hot"})", 400},
      {"/v1/chat/completions", R"({"messages": "hi"})", 400},
      {"/v1/chat/completions", R"({"messages": [{"role": "wizard", "content": "x"}]})", 400},
      {"/v1/completions", R"({"prompt": "x", "session_id": "../../etc/passwd"})", 400},
      {"/v1/completions", std::string(R"({"prompt": ")") + std::string(8000, 'a') + "\"}", 413},
      {"/v1/completions", R"({"prompt": "x", "n": 65})", 400},
      {"/v1/completions", R"({"prompt": "x", "n": 0})", 400},
      {"/v1/chat/completions",
       R"({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]})", 400},
      {"/v1/chat/completions", R"({"messages": [{"role": "user", "content": [{"type": "text"}]}]})", 400},
      {"/v1/chat/completions", R"({"messages": [{"role": "user"}]})", 400},
  };
  for (const auto& k : cases) {
    auto r = c.Post(k.path, k.body, "application/json");
    ASSERT_TRUE(r) << k.body.substr(0, 60);
    EXPECT_EQ(r->status, k.status) << k.body.substr(0, 60);
    auto j = json::parse(r->body, nullptr, false);
    EXPECT_TRUE(j.is_object() && j.contains("error")) << r->body;
  }
  EXPECT_EQ(c.Get("/v1/sessions/nope")->status, 404);
  EXPECT_EQ(c.Delete("/v1/sessions/nope")->status, 404);
  int status = 0;
  test::post(c, "/v1/completions", {{"prompt", "still alive"}, {"max_tokens", 3}}, &status);
  EXPECT_EQ(status, 200);
}

// OpenAI request shapes other clients send: content as an array of text
// parts (joined with newlines), the `developer` role (a system message), n = 1.
TEST(Server, ContentPartsDeveloperRoleAndNOfOneAreAccepted) {
  test::TestServer srv(test::stories_gguf(), test::default_sched());
  auto c = srv.client();
  auto ask = [&](const json& messages) {
    int status = 0;
    auto r = test::post(c, "/v1/chat/completions",
                        {{"messages", messages}, {"max_tokens", 8}, {"temperature", 0}, {"n", 1}}, &status);
    EXPECT_EQ(status, 200) << r.dump();
    return r["choices"][0]["message"]["content"].get<std::string>();
  };
  const std::string plain = ask({{{"role", "system"}, {"content", "Be brief."}},
                                 {{"role", "user"}, {"content", "Lily had a cat.\nIt was red."}}});
  const std::string parts = ask(
      {{{"role", "developer"}, {"content", {{{"type", "text"}, {"text", "Be brief."}}}}},
       {{"role", "user"},
        {"content", {{{"type", "text"}, {"text", "Lily had a cat."}}, {{"type", "text"}, {"text", "It was red."}}}}}});
  EXPECT_EQ(parts, plain);
}

// A non-stream request without max_tokens ends at the server's default;
// an explicit max_tokens is kept.
TEST(Server, NonStreamRequestsWithoutMaxTokensEnd) {
  ServerOptions so;
  so.default_max_tokens = 7;
  test::TestServer srv(test::stories_gguf(), test::default_sched(), so);
  auto c = srv.client();
  auto r = test::post(c, "/v1/completions", {{"prompt", "Once upon a time"}, {"temperature", 0}});
  EXPECT_EQ(r["usage"]["completion_tokens"], 7);
  EXPECT_EQ(r["choices"][0]["finish_reason"], "length");
  r = test::post(c, "/v1/completions", {{"prompt", "Once upon a time"}, {"temperature", 0}, {"max_tokens", 12}});
  EXPECT_EQ(r["usage"]["completion_tokens"], 12);
}

// Raw bytes to the server, the status code back (0 if none).
int raw_status(int port, const std::string& request) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int status = 0;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      ::send(fd, request.data(), request.size(), 0) == static_cast<ssize_t>(request.size())) {
    char buf[256] = {};
    if (::recv(fd, buf, sizeof buf - 1, 0) > 12) status = std::atoi(buf + 9);  // "HTTP/1.1 NNN"
  }
  ::close(fd);
  return status;
}

TEST(Server, ApiKeyIsRequiredWhenSet) {
  ServerOptions so;
  so.api_key = "s3cret";
  test::TestServer srv(test::stories_gguf(), test::default_sched(), so);
  auto c = srv.client();
  EXPECT_EQ(c.Get("/v1/models")->status, 401);
  EXPECT_EQ(c.Get("/v1/models", httplib::Headers{{"Authorization", "Bearer wrong"}})->status, 401);
  EXPECT_EQ(c.Get("/v1/models", httplib::Headers{{"Authorization", "Bearer s3cret"}})->status, 200);
  EXPECT_EQ(c.Get("/health")->status, 200);
  // Metrics tell an anonymous client about traffic: behind the key too.
  EXPECT_EQ(c.Get("/metrics")->status, 401);
  EXPECT_EQ(c.Get("/metrics", httplib::Headers{{"Authorization", "Bearer s3cret"}})->status, 200);
  // A key followed by a NUL and anything: refused, not read as the key.
  using namespace std::string_literals;
  EXPECT_EQ(raw_status(srv.port,
                       "GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer s3cret\0xyz\r\n"
                       "Connection: close\r\n\r\n"s),
            400);
  EXPECT_EQ(raw_status(srv.port,
                       "GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer s3cret\r\n"
                       "Connection: close\r\n\r\n"s),
            200);
  EXPECT_TRUE(constant_time_equal("abc", "abc"));
  EXPECT_FALSE(constant_time_equal("abc", "abd"));
  EXPECT_FALSE(constant_time_equal("abc", "abcd"));
}

}  // namespace
}  // namespace ss
