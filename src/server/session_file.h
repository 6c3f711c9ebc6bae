#pragma once
// Durable session state: one file per session in the state directory,
// written as temp file + fsync + rename (+ fsync of the directory), in a
// versioned binary format with a checksum. A torn or corrupt file is
// detected on load and the previous good copy (.bak) is used instead.
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "runtime/engine.h"
#include "util/result.h"

namespace ss {

struct SessionRecord {
  std::string id;
  SequenceState state;
  std::vector<int32_t> pending;  // sampled but not yet fed (fed with the next turn)
  int64_t turns = 0;
  int64_t tokens_in = 0, tokens_out = 0;
  // The last turn's Idempotency-Key and reply (version 4): a client that
  // lost the reply (its replica died after saving) gets it again instead of
  // a second turn.
  std::string last_key, last_reply;
};

// n_layers: full-attention layers (rows per cached index); sliding layers
// keep their own window's rows.
struct ModelFingerprint {
  int32_t n_layers = 0, kv_dim = 0, n_vocab = 0;
  int32_t sliding_layers = 0, sliding_window = 0;
};
ModelFingerprint fingerprint_of(const ModelConfig& c);

// The checksum that ends a session file: of every byte before it.
uint64_t session_checksum(const uint8_t* p, size_t n);

std::vector<uint8_t> encode_session(const SessionRecord& r, const ModelFingerprint& fp);
Result<SessionRecord> decode_session(const std::vector<uint8_t>& bytes, const ModelFingerprint& fp);

// Idempotency keys: at most this many bytes.
constexpr uint32_t kMaxIdempotencyKey = 128;
// Session ids: 1..64 chars of [A-Za-z0-9_-] (they name files).
bool valid_session_id(const std::string& id);

// note (optional): set when the newest file on disk was corrupt and was
// discarded rather than kept as the backup.
Status save_session(const std::string& dir, const SessionRecord& r, const ModelFingerprint& fp,
                    std::string* note = nullptr);
// fallback (optional): set when the newest file was bad and .bak was loaded.
Result<SessionRecord> load_session(const std::string& path, const ModelFingerprint& fp,
                                   std::string* fallback = nullptr);
Status remove_session(const std::string& dir, const std::string& id);
std::string session_path(const std::string& dir, const std::string& id);
// The turn count in a session file's header (-1 when there is no readable
// header): a version number every save increments, read without the KV.
int64_t peek_session_turns(const std::string& path);
// Every session in dir, one at a time (only one record's KV in memory). Each
// problem is a line in `problems`: a fallback to .bak (counted in *fallbacks)
// or a session that could not be loaded at all (counted in *rejected).
void for_each_session(const std::string& dir, const ModelFingerprint& fp, std::vector<std::string>& problems,
                      int64_t* fallbacks, int64_t* rejected, const std::function<void(SessionRecord&&)>& fn);
// Removes the temporaries of saves that never finished (a process killed
// mid-write leaves PATH.part.PID.N, util/atomic_file.h; older builds left
// .tmp) once older than `min_age`: a save takes milliseconds, so one that
// old belongs to no writer, on this host or another sharing the folder.
// Returns how many it removed.
int remove_stale_temporaries(const std::string& dir, std::chrono::seconds min_age);
// Every session in dir. Each problem is a line in `problems`: a fallback to
// .bak (counted in *fallbacks) or a session that could not be loaded at all
// (counted in *rejected).
std::vector<SessionRecord> load_all_sessions(const std::string& dir, const ModelFingerprint& fp,
                                             std::vector<std::string>& problems, int64_t* fallbacks = nullptr,
                                             int64_t* rejected = nullptr);

}  // namespace ss
