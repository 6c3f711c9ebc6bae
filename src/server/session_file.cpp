#include "server/session_file.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>
#include <span>

#include "util/atomic_file.h"
#include "util/byte_reader.h"
#include "util/byte_writer.h"
#include "util/mapped_file.h"

namespace ss {

namespace {
constexpr uint32_t kMagic = 0x564B5353;  // "SSKV"
// 3: the KV cache's element type, rows counted in bytes of that type.
// 2: sliding layers' rows. 1: full layers only. (1 and 2 hold F32 rows,
// counted in floats.)
constexpr uint32_t kVersion = 4;  // 4: last turn's idempotency key and reply

}  // namespace

uint64_t session_checksum(const uint8_t* p, size_t n) {  // FNV-1a
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
  return h;
}

ModelFingerprint fingerprint_of(const ModelConfig& c) {
  return {c.full_layers(), c.kv_dim(), c.n_vocab, c.n_layers - c.full_layers(), c.sliding_window()};
}

bool valid_session_id(const std::string& id) {
  if (id.empty() || id.size() > 64) return false;
  for (char c : id)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-')) return false;
  return true;
}

std::vector<uint8_t> encode_session(const SessionRecord& r, const ModelFingerprint& fp) {
  std::vector<uint8_t> b;
  put(b, kMagic);
  put(b, kVersion);
  put(b, fp.n_layers);
  put(b, fp.kv_dim);
  put(b, fp.n_vocab);
  put(b, fp.sliding_layers);
  put(b, fp.sliding_window);
  put<uint32_t>(b, static_cast<uint32_t>(r.state.kv_type));
  put<uint32_t>(b, static_cast<uint32_t>(r.id.size()));
  b.insert(b.end(), r.id.begin(), r.id.end());
  put<uint8_t>(b, static_cast<uint8_t>(r.state.policy.kind));
  put(b, r.state.policy.sinks);
  put(b, r.state.policy.window);
  put<int64_t>(b, 0);  // was recompute's length in version 1; always 0
  put(b, r.state.n_seen);
  put(b, r.turns);
  put(b, r.tokens_in);
  put(b, r.tokens_out);
  put<uint64_t>(b, r.pending.size());
  for (int32_t t : r.pending) put(b, t);
  put<uint32_t>(b, static_cast<uint32_t>(r.last_key.size()));
  b.insert(b.end(), r.last_key.begin(), r.last_key.end());
  put<uint64_t>(b, r.last_reply.size());
  b.insert(b.end(), r.last_reply.begin(), r.last_reply.end());
  put<uint64_t>(b, r.state.indices.size());
  for (int64_t u : r.state.indices) put(b, u);
  put<uint64_t>(b, r.state.rows.size());
  b.insert(b.end(), r.state.rows.begin(), r.state.rows.end());
  put<uint64_t>(b, r.state.sliding_rows.size());
  b.insert(b.end(), r.state.sliding_rows.begin(), r.state.sliding_rows.end());
  put(b, session_checksum(b.data(), b.size()));
  return b;
}

Result<SessionRecord> decode_session(const std::vector<uint8_t>& bytes, const ModelFingerprint& fp) {
  if (bytes.size() < 16) return make_error("session file truncated");
  uint64_t sum;
  std::memcpy(&sum, bytes.data() + bytes.size() - 8, 8);
  if (sum != session_checksum(bytes.data(), bytes.size() - 8))
    return make_error("session file checksum mismatch (torn or corrupt)");
  ByteReader r(std::span<const uint8_t>(bytes.data(), bytes.size() - 8));
  uint32_t magic, version;
  ModelFingerprint got;
  if (!r.read(magic) || magic != kMagic) return make_error("not a sinkstream session file");
  // Version 1 (before sliding layers) is version 2 with none.
  if (!r.read(version) || version < 1 || version > kVersion) return make_error("unsupported session file version");
  if (!r.read(got.n_layers) || !r.read(got.kv_dim) || !r.read(got.n_vocab)) return make_error("session file truncated");
  if (version >= 2 && (!r.read(got.sliding_layers) || !r.read(got.sliding_window)))
    return make_error("session file truncated");
  if (got.n_layers != fp.n_layers || got.kv_dim != fp.kv_dim || got.n_vocab != fp.n_vocab ||
      got.sliding_layers != fp.sliding_layers || got.sliding_window != fp.sliding_window)
    return make_error("session was saved with a different model");
  SessionRecord s;
  uint32_t type = 0;
  if (version >= 3 && !r.read(type)) return make_error("session file truncated");
  s.state.kv_type = static_cast<GgmlType>(type);
  if (!kv_type_usable(s.state.kv_type, fp.kv_dim).ok()) return make_error("bad KV cache type in session file");
  // Rows in bytes (version 3) or F32 rows in floats.
  const uint64_t unit = version >= 3 ? 1 : 4;
  uint32_t id_len;
  if (!r.read(id_len) || id_len > 64 || !r.read_bytes(id_len, s.id) || !valid_session_id(s.id))
    return make_error("bad session id");
  uint8_t kind;
  auto& p = s.state.policy;
  int64_t unused = 0;
  if (!r.read(kind) || kind > 2 || !r.read(p.sinks) || !r.read(p.window) || !r.read(unused) || unused != 0)
    return make_error("bad policy in session file");
  p.kind = static_cast<PolicyKind>(kind);
  // Every field in range before anything is sized from it: a file with a
  // valid checksum can still say anything.
  constexpr int64_t kMaxPolicyValue = int64_t{1} << 24;  // as KvPolicy::parse
  for (int64_t v : {p.sinks, p.window})
    if (v < 0 || v > kMaxPolicyValue) return make_error("bad policy in session file: value out of range");
  if (p.bounded() && p.window < 1) return make_error("bad policy in session file: window must be >= 1");
  if (!r.read(s.state.n_seen) || !r.read(s.turns) || !r.read(s.tokens_in) || !r.read(s.tokens_out))
    return make_error("session file truncated");
  constexpr int64_t kMaxCount = int64_t{1} << 50;
  for (int64_t v : {s.state.n_seen, s.turns, s.tokens_in, s.tokens_out})
    if (v < 0 || v > kMaxCount) return make_error("bad counter in session file");
  uint64_t n;
  if (!r.read(n) || n > r.remaining() / 4) return make_error("bad pending count");
  s.pending.resize(static_cast<size_t>(n));
  for (auto& t : s.pending)
    if (!r.read(t) || t < 0 || t >= fp.n_vocab) return make_error("bad pending token");
  if (version >= 4) {
    uint32_t key_len;
    uint64_t reply_len;
    if (!r.read(key_len) || key_len > kMaxIdempotencyKey || !r.read_bytes(key_len, s.last_key))
      return make_error("bad idempotency key in session file");
    if (!r.read(reply_len) || reply_len > r.remaining() || !r.read_bytes(static_cast<size_t>(reply_len), s.last_reply))
      return make_error("bad last reply in session file");
  }
  // The cached tokens follow from the policy and n_seen (sinks, then the
  // window's tail): anything else would put two tokens in one slot.
  const int64_t n_seen = s.state.n_seen, sinks = std::min(p.sinks, n_seen);
  const int64_t w0 = p.bounded() ? std::max(p.sinks, n_seen - p.window) : p.sinks;
  const uint64_t want = static_cast<uint64_t>(sinks + std::max<int64_t>(0, n_seen - w0));
  if (!r.read(n) || n != want || n > r.remaining() / 8) return make_error("bad index count");
  s.state.indices.resize(static_cast<size_t>(n));
  for (size_t i = 0; i < s.state.indices.size(); ++i) {
    const int64_t expect =
        static_cast<int64_t>(i) < sinks ? static_cast<int64_t>(i) : w0 + (static_cast<int64_t>(i) - sinks);
    if (!r.read(s.state.indices[i]) || s.state.indices[i] != expect) return make_error("bad cache index");
  }
  const uint64_t row_units = 2 * static_cast<uint64_t>(row_bytes(s.state.kv_type, fp.kv_dim)) / unit;
  if (!r.read(n) || n != s.state.indices.size() * static_cast<uint64_t>(fp.n_layers) * row_units ||
      n > r.remaining() / unit)
    return make_error("bad KV row count");
  std::string raw;
  r.read_bytes(static_cast<size_t>(n * unit), raw);
  s.state.rows.assign(raw.begin(), raw.end());
  // The sliding layers' window: its last min(n_seen, window - 1) tokens.
  const uint64_t want_swa = static_cast<uint64_t>(sliding_resident(fp.sliding_window, n_seen).size()) *
                            static_cast<uint64_t>(fp.sliding_layers) * row_units;
  if (version == 1) {
    n = 0;
  } else if (!r.read(n)) {
    return make_error("bad sliding KV row count");
  }
  if (n != want_swa || n * unit != r.remaining()) return make_error("bad sliding KV row count");
  r.read_bytes(static_cast<size_t>(n * unit), raw);
  s.state.sliding_rows.assign(raw.begin(), raw.end());
  return s;
}

int64_t peek_session_turns(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  uint8_t buf[256];
  const ssize_t n = ::read(fd, buf, sizeof buf);
  ::close(fd);
  if (n <= 0) return -1;
  ByteReader r(std::span<const uint8_t>(buf, static_cast<size_t>(n)));
  uint32_t magic = 0, version = 0, u32 = 0, id_len = 0;
  uint8_t kind = 0;
  int64_t i64 = 0, turns = -1;
  if (!r.read(magic) || magic != kMagic || !r.read(version) || version < 1 || version > kVersion) return -1;
  const int fp_fields = version >= 2 ? 5 : 3;
  for (int i = 0; i < fp_fields; ++i)
    if (!r.read(u32)) return -1;
  if (version >= 3 && !r.read(u32)) return -1;
  std::string id;
  if (!r.read(id_len) || id_len > 64 || !r.read_bytes(id_len, id) || !r.read(kind)) return -1;
  for (int i = 0; i < 4; ++i)  // sinks, window, unused, n_seen
    if (!r.read(i64)) return -1;
  if (!r.read(turns)) return -1;
  return turns;
}

static Result<SessionRecord> load_one(const std::string& path, const ModelFingerprint& fp) {
  auto f = MappedFile::open(path);
  if (!f.ok()) return f.error();
  const auto b = f.value()->bytes();
  auto r = decode_session(std::vector<uint8_t>(b.begin(), b.end()), fp);
  if (!r.ok()) return make_error(path + ": " + r.error().message);
  return r;
}

Status save_session(const std::string& dir, const SessionRecord& rec, const ModelFingerprint& fp, std::string* note) {
  if (!valid_session_id(rec.id)) return make_error("invalid session id");
  const std::string path = session_path(dir, rec.id);
  const auto bytes = encode_session(rec, fp);
  SS_ASSIGN_OR_RETURN(AtomicFile out, AtomicFile::create(path, 0600));
  SS_TRY(out.write(bytes));
  // Keep the previous good copy as .bak (a newest file that is corrupt —
  // torn, bit rot — must not replace a good .bak). The path itself is never
  // missing, not even for a moment: the old file becomes .bak through a
  // second name (a hard link, or a copy where links are not supported), then
  // the new one replaces it in one rename. Moving the old file away first
  // left a window in which another replica's check, or a kill -9 of this
  // one, saw no session at all and started it over from the request's text.
  if (::access(path.c_str(), F_OK) == 0) {
    if (auto old = load_one(path, fp); old.ok()) {
      const std::string bak = path + ".bak", bak_tmp = path + ".bak.tmp";
      ::unlink(bak_tmp.c_str());
      if (::link(path.c_str(), bak_tmp.c_str()) == 0) {
        ::rename(bak_tmp.c_str(), bak.c_str());
      } else if (auto f = MappedFile::open(path); f.ok()) {  // no hard links here: a copy
        if (auto copy = AtomicFile::create(bak, 0600); copy.ok() && copy->write(f.value()->bytes()).ok())
          (void)copy->commit();
      }
    } else if (note) {
      *note = "discarded " + old.error().message + " instead of keeping it as the backup";
    }
  }
  return out.commit();
}

Result<SessionRecord> load_session(const std::string& path, const ModelFingerprint& fp, std::string* fallback) {
  auto r = load_one(path, fp);
  if (r.ok()) return r;
  auto bak = load_one(path + ".bak", fp);
  if (bak.ok()) {
    if (fallback) *fallback = r.error().message + "; restored the previous copy (.bak)";
    return bak;
  }
  return r.error();
}

Status remove_session(const std::string& dir, const std::string& id) {
  if (!valid_session_id(id)) return make_error("invalid session id");
  const std::string path = session_path(dir, id);
  ::unlink(path.c_str());
  ::unlink((path + ".bak").c_str());
  ::unlink((path + ".bak.tmp").c_str());
  return ok_status();
}

std::string session_path(const std::string& dir, const std::string& id) { return dir + "/" + id + ".sskv"; }

int remove_stale_temporaries(const std::string& dir, std::chrono::seconds min_age) {
  std::error_code ec;
  const auto now = std::filesystem::file_time_type::clock::now();
  int removed = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    const auto ends_with = [&](const std::string& tail) {
      return name.size() > tail.size() && name.compare(name.size() - tail.size(), tail.size(), tail) == 0;
    };
    const bool temporary = name.find(".sskv.part.") != std::string::npos ||
                           name.find(".sskv.bak.part.") != std::string::npos || ends_with(".sskv.tmp") ||
                           ends_with(".sskv.bak.tmp");
    if (!temporary || !e.is_regular_file(ec)) continue;
    const auto written = e.last_write_time(ec);
    if (ec || now - written < min_age) continue;
    if (std::filesystem::remove(e.path(), ec)) ++removed;
  }
  return removed;
}

void for_each_session(const std::string& dir, const ModelFingerprint& fp, std::vector<std::string>& problems,
                      int64_t* fallbacks, int64_t* rejected, const std::function<void(SessionRecord&&)>& fn) {
  DIR* d = ::opendir(dir.c_str());
  if (!d) return;
  std::map<std::string, bool> ids;
  while (dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    for (const std::string suffix : {".sskv", ".sskv.bak"})
      if (name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
        ids[name.substr(0, name.size() - suffix.size())] = true;
  }
  ::closedir(d);
  for (const auto& [id, _] : ids) {
    if (!valid_session_id(id)) continue;
    std::string fallback;
    auto r = load_session(session_path(dir, id), fp, &fallback);
    if (!fallback.empty()) {
      problems.push_back(fallback);
      if (fallbacks) ++*fallbacks;
    }
    if (r.ok()) {
      fn(std::move(r.value()));
    } else {
      problems.push_back(r.error().message);
      if (rejected) ++*rejected;
    }
  }
}

std::vector<SessionRecord> load_all_sessions(const std::string& dir, const ModelFingerprint& fp,
                                             std::vector<std::string>& problems, int64_t* fallbacks,
                                             int64_t* rejected) {
  std::vector<SessionRecord> out;
  for_each_session(dir, fp, problems, fallbacks, rejected, [&](SessionRecord&& r) { out.push_back(std::move(r)); });
  return out;
}

}  // namespace ss
