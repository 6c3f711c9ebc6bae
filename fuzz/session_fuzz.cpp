// A session file as the server restores it after a restart
// (server/session_file.h), for stories260K: the input is the file without its
// checksum, which is appended, so mutations reach the parser rather than
// stopping at the checksum (a file with a valid checksum can still say
// anything: bit rot before the write, another build's bug, an attacker with
// access to the state directory). A record decode_session accepts is
// imported into an engine and continued as the server would: its pending
// tokens fed, one token decoded, sampled greedily and with temperature,
// whatever its KV rows hold (NaN and infinite scales included). Nothing may
// crash; a record that decodes must import (decode_session checks every
// field import relies on).
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>

#include "model/model.h"
#include "runtime/engine.h"
#include "sample/sampler.h"
#include "server/session_file.h"

namespace {
std::string shared_dir() {
  if (const char* s = std::getenv("SINKSTREAM_SHARED")) return s;
  return SS_SHARED_DEFAULT;
}

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "session restore invariant broken: %s\n", what.c_str());
  std::abort();
}

// One engine per KV type a file may name, built on first use.
ss::Engine& engine_for(const std::shared_ptr<const ss::Model>& model, ss::GgmlType kv_type) {
  static std::vector<std::pair<ss::GgmlType, std::unique_ptr<ss::Engine>>> engines;
  for (auto& [t, e] : engines)
    if (t == kv_type) return *e;
  ss::EngineOptions eo;
  eo.kv_type = kv_type;
  eo.kv_blocks = 64;
  eo.act_quant = ss::ActQuant::Int8;
  engines.emplace_back(kv_type, std::make_unique<ss::Engine>(model, eo));
  return *engines.back().second;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::shared_ptr<const ss::Model> model = [] {
    auto m = ss::load_model({shared_dir() + "/models/stories260K/stories260K.gguf", ""});
    if (!m.ok()) std::abort();  // the fuzzer needs ../shared
    return m.value();
  }();
  std::vector<uint8_t> file(data, data + size);
  const uint64_t sum = ss::session_checksum(file.data(), file.size());
  for (int i = 0; i < 8; ++i) file.push_back(static_cast<uint8_t>(sum >> (8 * i)));
  auto rec = ss::decode_session(file, ss::fingerprint_of(model->config));
  if (!rec.ok()) return 0;
  ss::Engine& engine = engine_for(model, rec->state.kv_type);
  auto seq = engine.import_sequence(rec->state);
  if (!seq.ok()) {
    // The pool is sized for any record: a window of up to 64 blocks of 16.
    if (rec->state.indices.size() > 60 * 16) return 0;
    fail("decoded record not imported: " + seq.error().message);
  }
  std::vector<int32_t> feed = rec->pending;
  if (feed.empty()) feed.push_back(1);
  if (feed.size() > 32) feed.resize(32);
  std::vector<std::vector<float>> logits;
  const ss::BatchItem item{seq.value(), feed};
  auto st = engine.forward(std::span<const ss::BatchItem>(&item, 1), logits);
  if (st.ok()) {
    const int32_t n_vocab = model->config.n_vocab;
    if (logits.size() != 1 || logits[0].size() != static_cast<size_t>(n_vocab)) fail("logits of the wrong shape");
    ss::SamplingParams greedy;
    greedy.temperature = 0;
    ss::SamplingParams warm;
    warm.seed = sum;
    for (const auto& p : {greedy, warm}) {
      ss::Sampler sampler(p);
      const int32_t t = sampler.sample(logits[0], feed);
      if (t < 0 || t >= n_vocab) fail("sampled a token outside the vocabulary");
    }
  }
  engine.free_sequence(seq.value());
  return 0;
}
