// Prefill in chunks of any size gives the same logits and the same final
// cache as feeding one token at a time, for prompts shorter and longer than
// S+W and S in {0, 1, 4}.
#include <cmath>
#include <cstring>

#include "runtime_helpers.h"
#include "tiny_model.h"

namespace ss {
namespace {

struct RunResult {
  std::vector<float> logits;           // [n x vocab]
  std::vector<std::vector<float>> kv;  // per resident token: K and V of all layers
};

RunResult run(std::shared_ptr<const Model> m, const KvPolicy& pol, const std::vector<int32_t>& prompt, int chunk,
              EngineOptions eo = {}) {
  eo.max_chunk = chunk;
  eo.kv_blocks = 256;
  Engine e(m, eo);
  const SeqId id = e.create_sequence(pol).value();
  RunResult r;
  std::vector<std::vector<float>> logits;
  if (chunk == 1) {
    for (int32_t t : prompt) {
      const BatchItem item{id, std::span<const int32_t>(&t, 1), true};
      EXPECT_TRUE(e.forward(std::span<const BatchItem>(&item, 1), logits).ok());
      r.logits.insert(r.logits.end(), logits[0].begin(), logits[0].end());
    }
  } else {
    const BatchItem item{id, prompt, true};
    EXPECT_TRUE(e.forward(std::span<const BatchItem>(&item, 1), logits).ok());
    r.logits = logits[0];
  }
  const auto* seq = e.sequence(id);
  const int64_t n = static_cast<int64_t>(prompt.size());
  const int kvd = m->config.kv_dim();
  for (int64_t u = 0; u < n; ++u) {
    if (!pol.visible(u, n)) continue;  // the entries a next token would see
    const KvSlot s = seq->slot(u);
    std::vector<float> row;
    for (int l = 0; l < m->config.n_layers; ++l) {
      const size_t at = row.size();
      row.resize(at + 2 * static_cast<size_t>(kvd));
      e.pool().load(s.block, l, s.offset, row.data() + at, row.data() + at + kvd);
    }
    r.kv.push_back(std::move(row));
  }
  return r;
}

TEST(ChunkedPrefill, EqualsTokenByTokenFeeding) {
  for (auto m : {test::stories_gguf(), test::ts656k()}) {
    ASSERT_TRUE(m);
    std::vector<int32_t> prompt;
    const auto golden = test::golden_tokens(*m);
    for (int64_t s : {0, 1, 4}) {
      const int64_t w = 24;
      const auto pol = KvPolicy::sinks_window(s, w);
      for (size_t len : {size_t{13}, size_t{150}}) {  // shorter and longer than S+W
        prompt.assign(golden.begin(), golden.begin() + static_cast<std::ptrdiff_t>(len));
        const RunResult ref = run(m, pol, prompt, 1);
        for (int chunk : {7, 64, 512}) {
          const RunResult got = run(m, pol, prompt, chunk);
          ASSERT_EQ(got.logits.size(), ref.logits.size());
          double worst = 0;
          for (size_t i = 0; i < ref.logits.size(); ++i)
            worst = std::max(worst, static_cast<double>(std::fabs(got.logits[i] - ref.logits[i])));
          EXPECT_LE(worst, 1e-4) << pol.name() << " len " << len << " chunk " << chunk;
          ASSERT_EQ(got.kv.size(), ref.kv.size());
          for (size_t j = 0; j < ref.kv.size(); ++j)
            for (size_t d = 0; d < ref.kv[j].size(); ++d) ASSERT_NEAR(got.kv[j][d], ref.kv[j][d], 1e-5) << j;
        }
      }
    }
  }
}

// A tiny model of `dim` with these heads, weights scaled so that attention
// stays far from uniform at any width.
test::TinySpec attention_spec(int dim, int heads, int kv_heads) {
  test::TinySpec s;
  s.dim = dim;
  s.hidden = 2 * dim;
  s.heads = heads;
  s.kv_heads = kv_heads;
  s.weight_std = 0.3f * std::sqrt(32.0f / static_cast<float>(dim));
  return s;
}

// Written, loaded and removed again; null (and a test failure) if it does not load.
std::shared_ptr<const Model> load_tiny(const test::TinySpec& s, const std::string& name) {
  const std::string path = test::write_tiny_model(s, name);
  auto mr = load_model({path, ""});
  std::remove(path.c_str());
  EXPECT_TRUE(mr.ok()) << mr.error().message;
  return mr.ok() ? mr.value() : nullptr;
}

// Multi-head models (and groups of two query heads per KV head) score
// consecutive tokens of a chunk in query tiles: the logits and the cache are
// bit for bit those of one query at a time, for heads of 16, 32, 48 and 64,
// float and quantized caches, windows that slide
// within the chunk (with and without sinks; one over several 256-key
// spans, where a tile across a 16-key chunk boundary would cut other spans:
// 302 keys put first window keys 2 past a multiple of 4, so tiles of four
// would cross one) and none, on two threads: chunks of 64 with query tiles
// and without, over 400 tokens, logits and cache alike.
void expect_tiles_change_no_bit(const std::shared_ptr<const Model>& m, const std::string& label) {
  std::vector<int32_t> prompt;
  for (int i = 0; i < 400; ++i) prompt.push_back((i * 37 + 11) % m->config.n_vocab);
  for (GgmlType kv : {GgmlType::F32, GgmlType::F16, GgmlType::Q8_0})
    for (const auto& pol : {KvPolicy::dense(), KvPolicy::sinks_window(4, 302), KvPolicy::sinks_window(0, 37),
                            KvPolicy::sinks_window(1, 2)}) {
      EngineOptions eo;
      eo.threads = 2;
      eo.kv_type = kv;
      const RunResult tiled = run(m, pol, prompt, 64, eo);
      eo.query_tiles = false;
      const RunResult single = run(m, pol, prompt, 64, eo);
      ASSERT_EQ(tiled.logits.size(), single.logits.size());
      EXPECT_EQ(std::memcmp(tiled.logits.data(), single.logits.data(), sizeof(float) * single.logits.size()), 0)
          << label << " " << kv_type_name(kv) << " " << pol.name();
      EXPECT_EQ(tiled.kv, single.kv) << label << " " << kv_type_name(kv) << " " << pol.name();
    }
}

TEST(ChunkedPrefill, QueryTilesEqualOneQueryAtATimeBitForBit) {
  struct Shape {
    int dim, heads, kv_heads;
  };
  for (const Shape& sh : {Shape{64, 4, 4}, Shape{96, 2, 2}, Shape{128, 2, 2}, Shape{128, 4, 2}, Shape{256, 4, 2}}) {
    const test::TinySpec s = attention_spec(sh.dim, sh.heads, sh.kv_heads);
    const auto m = load_tiny(s, "tiles_" + std::to_string(sh.dim) + ".gguf");
    ASSERT_NE(m, nullptr);
    expect_tiles_change_no_bit(m, "dim " + std::to_string(sh.dim) + " heads " + std::to_string(sh.heads));
  }
}

// ALiBi tiles too (the MPT golden model: heads of 16, one KV head per query
// head): each row adds its own biases, from its own query position against
// re-assigned sink positions and window distances.
TEST(ChunkedPrefill, AlibiQueryTilesEqualOneQueryAtATimeBitForBit) {
  const auto m = test::model_at("golden/arch/mpt/model.gguf");
  ASSERT_TRUE(m);
  ASSERT_EQ(m->config.positions, PositionKind::Alibi);
  ASSERT_EQ(m->config.n_heads, m->config.n_kv_heads);  // MHA: tiled
  ASSERT_GT(m->config.head_dim, 8);
  expect_tiles_change_no_bit(m, "mpt");
}

// Attention over a cache larger than the CPU's caches prefetches blocks
// ahead (EngineOptions::stream_kv_bytes): the logits and the cache are bit
// for bit those without, token by token and in chunks, for float and
// quantized caches, heads of 8 (a path the hint must not move) and 64.
TEST(ChunkedPrefill, StreamingKvHintChangesNoBit) {
  for (int heads : {16, 2}) {
    const test::TinySpec s = attention_spec(128, heads, heads);
    const auto m = load_tiny(s, "stream_kv_" + std::to_string(heads) + ".gguf");
    ASSERT_NE(m, nullptr);
    std::vector<int32_t> prompt;
    for (int i = 0; i < 300; ++i) prompt.push_back((i * 29 + 5) % s.vocab);
    for (GgmlType kv : {GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q8_0, GgmlType::Q4_0})
      for (const auto& pol : {KvPolicy::dense(), KvPolicy::sinks_window(4, 100)})
        for (int chunk : {1, 64}) {
          EngineOptions eo;
          eo.threads = 2;
          eo.kv_type = kv;
          eo.stream_kv_bytes = 0;  // always
          const RunResult streamed = run(m, pol, prompt, chunk, eo);
          eo.stream_kv_bytes = SIZE_MAX;  // never
          const RunResult plain = run(m, pol, prompt, chunk, eo);
          ASSERT_EQ(streamed.logits.size(), plain.logits.size());
          EXPECT_EQ(std::memcmp(streamed.logits.data(), plain.logits.data(), sizeof(float) * plain.logits.size()), 0)
              << "heads " << heads << " " << kv_type_name(kv) << " " << pol.name() << " chunk " << chunk;
          EXPECT_EQ(streamed.kv, plain.kv) << "heads " << heads << " " << kv_type_name(kv) << " " << pol.name();
        }
  }
}

}  // namespace
}  // namespace ss
