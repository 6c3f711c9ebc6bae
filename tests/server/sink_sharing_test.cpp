// Shared sink blocks never leak another conversation into a sequence: a
// sequence adopts registered sink KV only when its own first S tokens are
// the key, so every answer equals what a fresh scheduler (nothing shared,
// nothing registered) gives for the same session transcript; and after every
// session is deleted the pool is back to its baseline.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>

#include "runtime_helpers.h"
#include "server/scheduler.h"

namespace ss {
namespace {

SchedulerOptions options() {
  SchedulerOptions so;
  so.policy = KvPolicy::sinks_window(4, 60);
  so.max_chunk = 16;
  so.kv_blocks = 200;
  return so;
}

// One turn, greedy, run to the end: the text and why it ended.
std::string turn(Scheduler& s, const std::vector<int32_t>& tokens, const std::string& session, int64_t max_tokens) {
  auto r = std::make_shared<GenerationRequest>();
  r->tokens = tokens;
  r->sampling.temperature = 0;
  r->max_tokens = max_tokens;
  r->session_id = session;
  auto refused = s.submit(r);
  EXPECT_FALSE(refused) << refused->message;
  if (refused) return "<refused>";
  std::string text;
  for (bool done = false; !done;) text += r->take(done, std::chrono::milliseconds(1000));
  return text + "|" + r->finish_reason;
}

// Exact once delete_session returned: it refreshes the pool figures itself.
int64_t blocks_used(Scheduler& s) { return s.metrics().kv_blocks_used; }

std::vector<int32_t> slice(const std::vector<int32_t>& v, size_t at, size_t n) {
  return {v.begin() + static_cast<std::ptrdiff_t>(at), v.begin() + static_cast<std::ptrdiff_t>(at + n)};
}

// The reported bug: a session's second turn registered its sink blocks under
// the first tokens of that turn's feed; a later request starting with those
// tokens adopted KV computed for the session's real start.
TEST(SinkSharing, LaterTurnsNeverRegisterSinksUnderTheirOwnTokens) {
  auto m = test::stories_gguf();
  const auto text = test::read_ids(test::shared("golden/stories260K/tokens.txt"));
  const auto t1 = slice(text, 0, 12), t2 = slice(text, 300, 12);
  std::vector<int32_t> probe = t2;
  probe.insert(probe.end(), text.begin() + 700, text.begin() + 720);

  Scheduler shared(m, options());
  const int64_t baseline = blocks_used(shared);
  EXPECT_EQ(turn(shared, t1, "a", 0), "|length");  // no reply: turn 2's feed is exactly t2
  (void)turn(shared, t2, "a", 5);
  const std::string got = turn(shared, probe, "", 20);

  Scheduler fresh(m, options());
  EXPECT_EQ(got, turn(fresh, probe, "", 20));

  EXPECT_TRUE(shared.delete_session("a"));
  EXPECT_EQ(blocks_used(shared), baseline);
}

// Randomized: sessions whose turns interleave with one-offs and with each
// other (some starting with the same tokens, so they do share sinks), and
// deletes. Each turn's answer equals a fresh scheduler's for that session's
// transcript alone; one-offs equal a fresh scheduler's one-off.
TEST(SinkSharing, RandomWorkloadEqualsFreshSchedulerPerSession) {
  auto m = test::stories_gguf();
  const auto text = test::read_ids(test::shared("golden/stories260K/tokens.txt"));
  std::mt19937 rng(23);
  Scheduler shared(m, options());
  const int64_t baseline = blocks_used(shared);
  struct Turn {
    std::vector<int32_t> tokens;
    int64_t max_tokens;
    std::string answer;
  };
  std::map<std::string, std::vector<Turn>> transcripts;
  std::vector<std::pair<std::vector<int32_t>, std::string>> one_offs;
  // Starts drawn from few places, so several sequences share their first tokens.
  auto chunk = [&](bool start) {
    const size_t at = start ? 40 * (rng() % 3) : 100 + rng() % 1800;
    return slice(text, at, 4 + rng() % 12);
  };
  for (int op = 0; op < 40; ++op) {
    const int kind = static_cast<int>(rng() % 10);
    if (kind < 6) {
      const std::string id = std::string("s").append(std::to_string(rng() % 4));
      auto& tr = transcripts[id];
      Turn t{chunk(tr.empty()), static_cast<int64_t>(rng() % 6), ""};
      t.answer = turn(shared, t.tokens, id, t.max_tokens);
      tr.push_back(t);
    } else if (kind < 9) {
      auto tokens = chunk(true);
      auto more = chunk(false);
      tokens.insert(tokens.end(), more.begin(), more.end());
      one_offs.push_back({tokens, turn(shared, tokens, "", 8)});
    } else if (!transcripts.empty()) {
      auto it = transcripts.begin();
      std::advance(it, static_cast<std::ptrdiff_t>(rng() % transcripts.size()));
      // Deleted sessions are checked now, as they were; a later turn under
      // the same id starts a new transcript.
      Scheduler oracle(m, options());
      for (const auto& t : it->second)
        EXPECT_EQ(turn(oracle, t.tokens, "x", t.max_tokens), t.answer) << it->first << " (deleted)";
      EXPECT_TRUE(shared.delete_session(it->first));
      transcripts.erase(it);
    }
  }
  for (const auto& [id, tr] : transcripts) {
    Scheduler oracle(m, options());
    for (size_t i = 0; i < tr.size(); ++i)
      EXPECT_EQ(turn(oracle, tr[i].tokens, "x", tr[i].max_tokens), tr[i].answer) << id << " turn " << i;
    EXPECT_TRUE(shared.delete_session(id));
  }
  for (const auto& [tokens, answer] : one_offs) {
    Scheduler oracle(m, options());
    EXPECT_EQ(turn(oracle, tokens, "", 8), answer);
  }
  EXPECT_EQ(blocks_used(shared), baseline) << "blocks leaked after every session was deleted";
}

// The same differential check under pressure: a pool with room for two live
// sequences (idle sessions spill to disk and come back), requests submitted
// several at a time (batched together), seeded sampling as well as greedy,
// and restarts of the scheduler on its state directory. Every completed turn
// must equal a fresh scheduler's answer for that session's transcript alone.
// kv_type: the cache's element type (spills and restarts carry it; shared
// sink blocks are in it).
void random_workload_with_spills(GgmlType kv_type) {
  auto options = [&] {
    SchedulerOptions so = ::ss::options();
    so.kv_type = kv_type;
    return so;
  };
  auto m = test::stories_gguf();
  const auto text = test::read_ids(test::shared("golden/stories260K/tokens.txt"));
  std::mt19937 rng(41);
  const std::string dir = test::temp_path("differential_state");
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  SchedulerOptions tight = options();
  tight.kv_blocks = 2 * blocks_per_sequence(tight.policy, 0, 16, tight.max_chunk);
  tight.state_dir = dir;
  auto shared = std::make_unique<Scheduler>(m, tight);
  struct Turn {
    std::vector<int32_t> tokens;
    int64_t max_tokens;
    uint64_t seed;  // 0: greedy
    std::string answer;
  };
  struct Pending {
    std::string id;
    Turn t;
    std::shared_ptr<GenerationRequest> req;
  };
  auto make = [](const Turn& t, const std::string& id) {
    auto r = std::make_shared<GenerationRequest>();
    r->tokens = t.tokens;
    r->max_tokens = t.max_tokens;
    r->session_id = id;
    r->sampling.temperature = t.seed ? 0.9f : 0.0f;
    r->sampling.seed = t.seed;
    return r;
  };
  auto wait = [](GenerationRequest& r) {
    std::string text;
    for (bool done = false; !done;) text += r.take(done, std::chrono::milliseconds(1000));
    return text + "|" + r.finish_reason;
  };
  std::map<std::string, std::vector<Turn>> transcripts;
  std::vector<Turn> one_offs;
  int64_t spills = 0, restarts = 0;
  for (int op = 0; op < 30; ++op) {
    const int kind = static_cast<int>(rng() % 10);
    if (kind < 8) {
      // A batch: up to three distinct sessions and a one-off, submitted together.
      std::vector<Pending> batch;
      std::vector<std::string> ids;
      for (int k = 0; k < 3; ++k) {
        const std::string id = std::string("s").append(std::to_string(rng() % 6));
        if (std::find(ids.begin(), ids.end(), id) != ids.end()) continue;
        ids.push_back(id);
        const bool first = transcripts[id].empty();
        const size_t at = first ? 40 * (rng() % 3) : 100 + rng() % 1800;
        Turn t{slice(text, at, 4 + rng() % (first ? 12 : 70)), static_cast<int64_t>(1 + rng() % 8),
               rng() % 2 ? 0 : 1 + rng() % 1000, ""};
        batch.push_back({id, t, make(t, id)});
      }
      Turn o{slice(text, 200 + rng() % 1500, 8 + rng() % 40), 6, rng() % 2 ? uint64_t{0} : uint64_t{7}, ""};
      batch.push_back({"", o, make(o, "")});
      for (auto& p : batch) {
        auto refused = shared->submit(p.req);
        ASSERT_FALSE(refused) << refused->message;
      }
      for (auto& p : batch) {
        p.t.answer = wait(*p.req);
        if (p.id.empty())
          one_offs.push_back(p.t);
        else
          transcripts[p.id].push_back(p.t);
      }
    } else if (kind == 8) {
      spills += shared->metrics().session_spills;
      shared.reset();  // a restart: sessions come back from the state directory
      shared = std::make_unique<Scheduler>(m, tight);
      ++restarts;
    } else if (!transcripts.empty()) {
      auto it = transcripts.begin();
      std::advance(it, static_cast<std::ptrdiff_t>(rng() % transcripts.size()));
      Scheduler oracle(m, options());
      for (const auto& t : it->second)
        EXPECT_EQ(wait(*[&] {
                    auto r = make(t, "x");
                    EXPECT_FALSE(oracle.submit(r));
                    return r;
                  }()),
                  t.answer)
            << it->first << " (deleted)";
      EXPECT_TRUE(shared->delete_session(it->first));
      transcripts.erase(it);
    }
  }
  spills += shared->metrics().session_spills;
  EXPECT_GT(spills, 5) << "the workload did not put the pool under pressure";
  EXPECT_GT(restarts, 0);
  auto oracle_answer = [&](Scheduler& oracle, const Turn& t, const std::string& id) {
    auto r = make(t, id);
    EXPECT_FALSE(oracle.submit(r));
    return wait(*r);
  };
  for (const auto& [id, tr] : transcripts) {
    Scheduler oracle(m, options());
    for (size_t i = 0; i < tr.size(); ++i)
      EXPECT_EQ(oracle_answer(oracle, tr[i], "x"), tr[i].answer) << id << " turn " << i;
    EXPECT_TRUE(shared->delete_session(id));
  }
  for (const auto& t : one_offs) {
    Scheduler oracle(m, options());
    EXPECT_EQ(oracle_answer(oracle, t, ""), t.answer);
  }
  EXPECT_EQ(blocks_used(*shared), 0) << "blocks leaked after every session was deleted";
  std::filesystem::remove_all(dir);
}

TEST(SinkSharing, RandomWorkloadWithSpillsRestartsAndSamplingEqualsFreshScheduler) {
  random_workload_with_spills(GgmlType::F32);
}

TEST(SinkSharing, RandomWorkloadWithSpillsRestartsAndSamplingEqualsFreshSchedulerInQ8_0) {
  random_workload_with_spills(GgmlType::Q8_0);
}

}  // namespace
}  // namespace ss
