#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "model/model.h"
#include "runtime/engine.h"
#include "sample/sampler.h"
#include "test_paths.h"

namespace ss::test {

inline std::shared_ptr<const Model> model_at(const std::string& rel, const std::string& tok = "") {
  static std::map<std::string, std::shared_ptr<const Model>> cache;
  auto& m = cache[rel];
  if (!m) {
    auto r = load_model({shared(rel), tok.empty() ? "" : shared(tok)});
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
    if (r.ok()) m = r.value();
  }
  return m;
}

inline std::shared_ptr<const Model> stories_gguf() { return model_at("models/stories260K/stories260K.gguf"); }
inline std::shared_ptr<const Model> stories_bin() {
  return model_at("models/stories260K/stories260K.bin", "models/stories260K/tok512.bin");
}
inline std::shared_ptr<const Model> ts656k() { return model_at("models/tinystories-656k"); }

// The golden token ids of a bundled model (stories260K has the 512-token
// vocabulary, TinyStories-656K the 2048-token one).
inline std::vector<int32_t> golden_tokens(const Model& m) {
  return read_ids(
      shared(m.config.n_vocab == 512 ? "golden/stories260K/tokens.txt" : "golden/tinystories-656k/tokens.txt"));
}

// Pool blocks for a dense cache of `tokens` tokens (16 a block), at least
// `floor`: a golden text longer than the bundled one still fits.
inline int dense_blocks(size_t tokens, int floor) { return std::max(floor, static_cast<int>(tokens / 16) + 16); }

// Greedy continuation of `prompt` for n tokens (no EOS stop).
inline std::vector<int32_t> greedy(Engine& e, const KvPolicy& pol, std::vector<int32_t> prompt, int n) {
  const SeqId id = e.create_sequence(pol).value();
  std::vector<std::vector<float>> logits;
  std::vector<int32_t> out;
  std::vector<int32_t> feed = std::move(prompt);
  for (int i = 0; i < n; ++i) {
    const BatchItem item{id, feed, false};
    EXPECT_TRUE(e.forward(std::span<const BatchItem>(&item, 1), logits).ok());
    const int32_t next = argmax(logits[0]);
    out.push_back(next);
    feed = {next};
  }
  e.free_sequence(id);
  return out;
}

// Feeds toks in chunks of `chunk` tokens; the logits of every token, in order.
inline std::vector<float> feed_chunks(Engine& e, SeqId id, std::span<const int32_t> toks, int chunk) {
  std::vector<float> out;
  std::vector<std::vector<float>> logits;
  for (size_t i = 0; i < toks.size(); i += static_cast<size_t>(chunk)) {
    const auto part = toks.subspan(i, std::min(toks.size() - i, static_cast<size_t>(chunk)));
    const BatchItem item{id, part, true};
    const Status st = e.forward(std::span<const BatchItem>(&item, 1), logits);
    EXPECT_TRUE(st.ok()) << (st.ok() ? "" : st.error().message);
    if (!st.ok()) break;
    out.insert(out.end(), logits[0].begin(), logits[0].end());
  }
  return out;
}

}  // namespace ss::test
