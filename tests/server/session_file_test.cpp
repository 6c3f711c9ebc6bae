// Session files: round trip, and torn/corrupt files are detected with the
// last good copy used instead.
#include "server/session_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <thread>
#include <vector>

#include "test_paths.h"

namespace ss {
namespace {

SessionRecord sample(int turns) {
  SessionRecord r;
  r.id = "abc-1";
  r.state.policy = KvPolicy::sinks_window(2, 3);
  r.state.n_seen = 10;
  r.state.indices = {0, 1, 7, 8, 9};
  r.state.rows.resize(5 * 2 * 2 * 4 * sizeof(float));  // F32 rows, as bytes
  for (size_t i = 0; i < r.state.rows.size(); ++i) r.state.rows[i] = static_cast<uint8_t>(i * 3 + turns);
  r.pending = {42};
  r.turns = turns;
  return r;
}

const ModelFingerprint kFp{2, 4, 100};

TEST(SessionFile, RoundTrip) {
  const auto r = sample(3);
  auto d = decode_session(encode_session(r, kFp), kFp);
  ASSERT_TRUE(d.ok()) << d.error().message;
  EXPECT_EQ(d->id, r.id);
  EXPECT_EQ(d->state.rows, r.state.rows);
  EXPECT_EQ(d->state.indices, r.state.indices);
  EXPECT_EQ(d->pending, r.pending);
  EXPECT_EQ(d->state.policy.name(), "sinks:2:3");
  EXPECT_FALSE(decode_session(encode_session(r, kFp), ModelFingerprint{3, 4, 100}).ok());
}

// Sliding layers keep their own window: its rows travel after the full
// layers', sized from n_seen and the window, and a wrong count is refused.
TEST(SessionFile, SlidingLayerRowsRoundTripAndAreCounted) {
  const ModelFingerprint fp{2, 4, 100, 3, 4};  // 3 sliding layers, window 4: last 3 tokens
  auto r = sample(2);
  r.state.sliding_rows.resize(3 * 3 * 2 * 4 * sizeof(float));
  for (size_t i = 0; i < r.state.sliding_rows.size(); ++i) r.state.sliding_rows[i] = static_cast<uint8_t>(255 - i);
  auto d = decode_session(encode_session(r, fp), fp);
  ASSERT_TRUE(d.ok()) << d.error().message;
  EXPECT_EQ(d->state.sliding_rows, r.state.sliding_rows);
  EXPECT_EQ(d->state.rows, r.state.rows);
  EXPECT_FALSE(decode_session(encode_session(r, fp), kFp).ok());  // saved with another model
  r.state.sliding_rows.pop_back();
  EXPECT_FALSE(decode_session(encode_session(r, fp), fp).ok());
}

// The cache's element type travels with the rows (their size follows from
// it); a type the model's rows cannot hold is refused.
TEST(SessionFile, KvTypeTravelsWithTheRows) {
  const ModelFingerprint fp{2, 32, 100};
  auto r = sample(1);
  r.state.kv_type = GgmlType::Q8_0;
  r.state.rows.assign(5 * 2 * 2 * row_bytes(GgmlType::Q8_0, 32), 7);
  auto d = decode_session(encode_session(r, fp), fp);
  ASSERT_TRUE(d.ok()) << d.error().message;
  EXPECT_EQ(d->state.kv_type, GgmlType::Q8_0);
  EXPECT_EQ(d->state.rows, r.state.rows);
  r.state.rows.pop_back();
  EXPECT_FALSE(decode_session(encode_session(r, fp), fp).ok());
  r = sample(1);  // kv_dim 4 cannot hold Q4_0's blocks of 32
  r.state.kv_type = GgmlType::Q4_0;
  r.state.rows.assign(5 * 2 * 2 * 2, 0);
  EXPECT_FALSE(decode_session(encode_session(r, kFp), kFp).ok());
}

// Version 2 files (F32 rows counted in floats, no type field) still load.
TEST(SessionFile, Version2FilesStillLoad) {
  const auto r = sample(4);
  auto b = encode_session(r, kFp);
  b.resize(b.size() - 8);  // checksum
  // Version 4 -> 3: drop the empty idempotency key and reply (u32 + u64
  // lengths) between the pending tokens and the index count.
  const size_t idx_at =
      b.size() - 8 - r.state.sliding_rows.size() - 8 - r.state.rows.size() - 8 * r.state.indices.size() - 8;
  b.erase(b.begin() + static_cast<std::ptrdiff_t>(idx_at - 12), b.begin() + static_cast<std::ptrdiff_t>(idx_at));
  // Version 3 -> 2: drop the type field after the fingerprint (magic,
  // version, five int32s), count rows in floats.
  const size_t type_at = 4 + 4 + 5 * 4;
  b.erase(b.begin() + static_cast<std::ptrdiff_t>(type_at), b.begin() + static_cast<std::ptrdiff_t>(type_at + 4));
  const uint32_t v2 = 2;
  std::memcpy(b.data() + 4, &v2, 4);
  const size_t rows_at = b.size() - 8 - r.state.sliding_rows.size() - r.state.rows.size() - 8;
  uint64_t n = r.state.rows.size() / sizeof(float);
  std::memcpy(b.data() + rows_at, &n, 8);
  uint64_t h = 1469598103934665603ull;  // fnv1a, as the file's checksum
  for (uint8_t c : b) h = (h ^ c) * 1099511628211ull;
  b.insert(b.end(), reinterpret_cast<uint8_t*>(&h), reinterpret_cast<uint8_t*>(&h) + 8);
  auto d = decode_session(b, kFp);
  ASSERT_TRUE(d.ok()) << d.error().message;
  EXPECT_EQ(d->state.kv_type, GgmlType::F32);
  EXPECT_EQ(d->state.rows, r.state.rows);
}

// Version 4: the last turn's idempotency key and reply round-trip; an
// oversized key is refused.
TEST(SessionFile, IdempotencyKeyAndReplyRoundTrip) {
  auto r = sample(3);
  r.last_key = "turn-7-of-session";
  r.last_reply = "Once upon a time\n\xE2\x96\x81 there was";
  auto d = decode_session(encode_session(r, kFp), kFp);
  ASSERT_TRUE(d.ok()) << d.error().message;
  EXPECT_EQ(d->last_key, r.last_key);
  EXPECT_EQ(d->last_reply, r.last_reply);
  EXPECT_EQ(d->state.rows, r.state.rows);
  r.last_key.assign(kMaxIdempotencyKey + 1, 'k');
  EXPECT_FALSE(decode_session(encode_session(r, kFp), kFp).ok());
}

// The header's turn count is the store's version number (server/scheduler:
// the fleet's check before a turn), read without the KV rows.
TEST(SessionFile, TurnCountIsReadFromTheHeaderAlone) {
  const std::string dir = test::temp_path("peek");
  std::filesystem::create_directories(dir);
  auto r = sample(2);
  r.turns = 7;
  ASSERT_TRUE(save_session(dir, r, kFp).ok());
  EXPECT_EQ(peek_session_turns(session_path(dir, r.id)), 7);
  r.turns = 8;
  ASSERT_TRUE(save_session(dir, r, kFp).ok());
  EXPECT_EQ(peek_session_turns(session_path(dir, r.id)), 8);
  EXPECT_EQ(peek_session_turns(dir + "/missing.session"), -1);
  std::ofstream(dir + "/junk") << "not a session file at all";
  EXPECT_EQ(peek_session_turns(dir + "/junk"), -1);
  std::filesystem::remove_all(dir);
}

// A save replaces the file in one step: a reader (another replica checking
// the store before a turn) never finds the session missing, and the previous
// copy is still kept as .bak. Before, the old file was renamed away first, so
// a reader in between (or a kill -9 there) saw no session and started it over.
// The session at `path` holds turn `turns`, its backup turn `bak_turns`.
void expect_turns(const std::string& path, int64_t turns, int64_t bak_turns) {
  auto now = load_session(path, kFp);
  ASSERT_TRUE(now.ok()) << now.error().message;
  EXPECT_EQ(now->turns, turns);
  auto bak = load_session(path + ".bak", kFp);
  ASSERT_TRUE(bak.ok()) << bak.error().message;
  EXPECT_EQ(bak->turns, bak_turns);
}

TEST(SessionFile, SavingNeverLeavesTheSessionMissing) {
  const std::string dir = test::temp_path("atomic");
  std::filesystem::create_directories(dir);
  ASSERT_TRUE(save_session(dir, sample(1), kFp).ok());
  const std::string path = session_path(dir, "abc-1");
  std::atomic<bool> done{false};
  std::atomic<int64_t> looks{0}, missing{0};
  std::thread reader([&] {
    struct stat st;
    while (!done.load()) {
      looks.fetch_add(1);
      if (::stat(path.c_str(), &st) != 0) missing.fetch_add(1);
    }
  });
  for (int t = 2; t < 300; ++t) ASSERT_TRUE(save_session(dir, sample(t), kFp).ok());
  done = true;
  reader.join();
  EXPECT_GT(looks.load(), 300);
  EXPECT_EQ(missing.load(), 0) << "of " << looks.load() << " looks";
  expect_turns(path, 299, 298);
  EXPECT_FALSE(std::filesystem::exists(path + ".bak.tmp"));
  std::filesystem::remove_all(dir);
}

// A save killed mid-write leaves its temporary; the next start removes
// those older than the given age (a live save takes milliseconds), and
// nothing else: not a fresh temporary (another replica may be writing it),
// not a session or its backup, not a file of another name.
TEST(SessionFile, StaleTemporariesAreRemovedAndNothingElse) {
  const test::TempPath dir("stale_temps");
  std::filesystem::create_directories(dir.path);
  ASSERT_TRUE(save_session(dir.path, sample(1), kFp).ok());
  ASSERT_TRUE(save_session(dir.path, sample(2), kFp).ok());  // and a .bak
  const std::string base = session_path(dir.path, "abc-1");
  const auto put = [](const std::string& path, bool old) {
    std::ofstream(path) << "x";
    if (old)
      std::filesystem::last_write_time(path, std::filesystem::file_time_type::clock::now() - std::chrono::hours(2));
  };
  const std::vector<std::string> stale = {base + ".part.123.0", base + ".bak.part.9.4", base + ".tmp",
                                          base + ".bak.tmp"};
  for (const auto& p : stale) put(p, true);
  put(base + ".part.456.1", false);         // a save in progress
  put(dir.path + "/notes.part.1.1", true);  // not ours
  EXPECT_EQ(remove_stale_temporaries(dir.path, std::chrono::hours(1)), 4);
  for (const auto& p : stale) EXPECT_FALSE(std::filesystem::exists(p)) << p;
  EXPECT_TRUE(std::filesystem::exists(base + ".part.456.1"));
  EXPECT_TRUE(std::filesystem::exists(dir.path + "/notes.part.1.1"));
  expect_turns(base, 2, 1);
  EXPECT_EQ(remove_stale_temporaries(dir.path + "/missing", std::chrono::hours(1)), 0);
}

TEST(SessionFile, EveryTruncationAndBitFlipIsDetected) {
  const auto b = encode_session(sample(1), kFp);
  for (size_t n = 0; n < b.size(); ++n) {
    std::vector<uint8_t> cut(b.begin(), b.begin() + static_cast<std::ptrdiff_t>(n));
    EXPECT_FALSE(decode_session(cut, kFp).ok()) << n;
  }
  for (size_t i = 0; i < b.size(); i += 7) {
    auto f = b;
    f[i] ^= 0x10;
    EXPECT_FALSE(decode_session(f, kFp).ok()) << i;
  }
}

TEST(SessionFile, TornWriteFallsBackToLastGoodState) {
  const std::string dir = test::temp_path("sessions");
  std::filesystem::create_directories(dir);
  ASSERT_TRUE(save_session(dir, sample(1), kFp).ok());
  ASSERT_TRUE(save_session(dir, sample(2), kFp).ok());
  // Tear the newest file in half, as a crash mid-write on a lax filesystem would.
  const std::string path = dir + "/abc-1.sskv";
  const auto size = std::filesystem::file_size(path);
  std::filesystem::resize_file(path, size / 2);
  auto r = load_session(path, kFp);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->turns, 1);  // the previous good copy
  std::vector<std::string> problems;
  int64_t fallbacks = 0, rejected = 0;
  EXPECT_EQ(load_all_sessions(dir, kFp, problems, &fallbacks, &rejected).size(), 1u);
  EXPECT_EQ(fallbacks, 1);  // the fallback is said and counted, not silent
  EXPECT_EQ(rejected, 0);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].find("restored the previous copy"), std::string::npos) << problems[0];
  // The next save must not rotate the torn file into .bak over the good one.
  std::string note;
  ASSERT_TRUE(save_session(dir, sample(3), kFp, &note).ok());
  EXPECT_NE(note.find("discarded"), std::string::npos) << note;
  std::filesystem::resize_file(path, std::filesystem::file_size(path) / 2);
  r = load_session(path, kFp);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->turns, 1);  // still the last good copy, not the torn turn 2
  EXPECT_FALSE(save_session("/nonexistent-dir", sample(1), kFp).ok());
  SessionRecord bad = sample(1);
  bad.id = "../x";
  EXPECT_FALSE(save_session(dir, bad, kFp).ok());
  std::filesystem::remove_all(dir);
}

// A file whose checksum is right can still hold any values: each field is
// range-checked before anything is sized from it (a window of 2^40 used to
// abort the server at every start).
TEST(SessionFile, FieldsOutOfRangeAreErrorsEvenWithAValidChecksum) {
  auto bad = [&](const std::function<void(SessionRecord&)>& edit, const char* what) {
    SessionRecord r = sample(1);
    edit(r);
    auto d = decode_session(encode_session(r, kFp), kFp);
    EXPECT_FALSE(d.ok()) << what;
  };
  bad([](SessionRecord& r) { r.state.policy.window = int64_t{1} << 40; }, "window 2^40");
  bad([](SessionRecord& r) { r.state.policy.sinks = -1; }, "negative sinks");
  bad([](SessionRecord& r) { r.state.policy.window = 0; }, "bounded window 0");
  bad([](SessionRecord& r) { r.state.policy.kind = static_cast<PolicyKind>(3); }, "kind");
  bad([](SessionRecord& r) { r.state.n_seen = -5; }, "negative n_seen");
  bad([](SessionRecord& r) { r.turns = -1; }, "negative turns");
  bad([](SessionRecord& r) { r.state.indices = {0, 1, 6, 8, 9}; }, "an evicted token cached");
  bad(
      [](SessionRecord& r) {
        r.state.indices = {0, 1, 7, 8};
        r.state.rows.resize(4 * 2 * 2 * 4 * sizeof(float));
      },
      "a window token missing");
  bad([](SessionRecord& r) { r.state.n_seen = 11; }, "indices that do not follow n_seen");
  EXPECT_TRUE(decode_session(encode_session(sample(1), kFp), kFp).ok());  // the unedited record is fine
}

TEST(SessionFile, IdsAreRestrictedToASafeCharset) {
  EXPECT_TRUE(valid_session_id("abc_DEF-123"));
  for (const char* bad : {"", "../a", "a/b", "a b", "a.b", "\xC3\xA4"}) EXPECT_FALSE(valid_session_id(bad)) << bad;
  EXPECT_FALSE(valid_session_id(std::string(65, 'a')));
}

}  // namespace
}  // namespace ss
