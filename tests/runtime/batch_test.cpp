// Several sequences in one batched forward give the same numbers as each on
// its own; bad input is rejected before any state changes.
#include "runtime/stream_mode.h"
#include "runtime_helpers.h"

namespace ss {
namespace {

TEST(Batch, MixedPrefillAndDecodeMatchesSeparateRuns) {
  auto m = test::stories_gguf();
  const auto tokens = test::read_ids(test::shared("golden/stories260K/tokens.txt"));
  EngineOptions eo;
  eo.kv_blocks = 200;
  eo.max_chunk = 16;
  Engine batched(m, eo);
  const std::vector<KvPolicy> pols = {KvPolicy::dense(), KvPolicy::sinks_window(4, 20), KvPolicy::sinks_window(0, 9)};
  std::vector<SeqId> ids;
  for (const auto& p : pols) ids.push_back(batched.create_sequence(p).value());
  // Different prompt lengths so prefill and decode overlap across steps.
  const std::vector<size_t> lens = {5, 40, 77};
  std::vector<std::vector<float>> logits;
  std::vector<BatchItem> items;
  for (size_t i = 0; i < pols.size(); ++i)
    items.push_back({ids[i], std::span<const int32_t>(tokens).subspan(i * 100, lens[i]), false});
  ASSERT_TRUE(batched.forward(items, logits).ok());
  for (size_t i = 0; i < pols.size(); ++i) {
    Engine single(m, eo);
    const SeqId id = single.create_sequence(pols[i]).value();
    std::vector<std::vector<float>> l1;
    const BatchItem it{id, std::span<const int32_t>(tokens).subspan(i * 100, lens[i]), false};
    ASSERT_TRUE(single.forward(std::span<const BatchItem>(&it, 1), l1).ok());
    for (size_t v = 0; v < l1[0].size(); ++v) ASSERT_NEAR(logits[i][v], l1[0][v], 1e-5) << i;
  }
}

TEST(Batch, RejectsBadInputWithoutStateChange) {
  auto m = test::stories_gguf();
  Engine e(m, EngineOptions{});
  const SeqId id = e.create_sequence(KvPolicy::sinks_window(4, 20)).value();
  std::vector<std::vector<float>> logits;
  const std::vector<int32_t> bad = {1, 512};
  BatchItem item{id, bad, false};
  auto st = e.forward(std::span<const BatchItem>(&item, 1), logits);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("out of range"), std::string::npos);
  EXPECT_EQ(e.sequence(id)->n_seen(), 0);
  const std::vector<int32_t> neg = {-1};
  item.tokens = neg;
  EXPECT_FALSE(e.forward(std::span<const BatchItem>(&item, 1), logits).ok());
  item.seq = 999;
  EXPECT_FALSE(e.forward(std::span<const BatchItem>(&item, 1), logits).ok());
  EXPECT_FALSE(KvPolicy::parse("recompute:8", 512).ok());  // an evaluation mode, not a cache policy
  EXPECT_EQ(StreamMode::parse("recompute:8", 512)->recompute_len, 8);
  EXPECT_EQ(StreamMode::parse("recompute", 512)->recompute_len, 512);
  EXPECT_EQ(StreamMode::parse("sinks:4:60", 512)->policy.name(), "sinks:4:60");
  for (const char* bad : {"recompute:", "recompute:0", "recompute:x", "recomputer", "recompute:8:1"})
    EXPECT_FALSE(StreamMode::parse(bad, 512).ok()) << bad;
}

TEST(Batch, FullPoolIsAnErrorNotACrash) {
  auto m = test::stories_gguf();
  EngineOptions eo;
  eo.kv_blocks = 2;
  Engine e(m, eo);
  const SeqId id = e.create_sequence(KvPolicy::dense()).value();
  std::vector<int32_t> toks(100, 5);
  std::vector<std::vector<float>> logits;
  const BatchItem item{id, toks, false};
  auto st = e.forward(std::span<const BatchItem>(&item, 1), logits);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("KV cache full"), std::string::npos);
}

}  // namespace
}  // namespace ss
