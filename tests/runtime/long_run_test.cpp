// 200k streamed tokens with sinks:4:60, then a probe: the probe's NLLs beyond
// its first W tokens equal those of the same probe after 1k streamed tokens
// (same sinks, same window content => same numbers), within 1e-3. The stream
// cycles a 1000-token text, so both streams end with the same 1000 tokens:
// more than the n_layers x W tokens that can still influence the probe.
#include <cmath>

#include "ops/activations.h"
#include "runtime_helpers.h"

namespace ss {
namespace {

std::vector<double> probe_after(std::shared_ptr<const Model> m, const std::vector<int32_t>& stream_src,
                                int64_t n_stream, const std::vector<int32_t>& probe) {
  const auto pol = KvPolicy::sinks_window(4, 60);
  EngineOptions eo;
  eo.threads = 2;
  eo.kv_blocks = 64;
  Engine e(m, eo);
  const SeqId id = e.create_sequence(pol).value();
  std::vector<std::vector<float>> logits;
  int64_t fed = 0;
  while (fed < n_stream) {  // the text cycles, BOS first, as a stream would
    const size_t off = static_cast<size_t>(fed % static_cast<int64_t>(stream_src.size()));
    const size_t n = std::min<size_t>(stream_src.size() - off, static_cast<size_t>(n_stream - fed));
    const size_t step = std::min<size_t>(n, 4096);
    const BatchItem item{id, std::span<const int32_t>(stream_src).subspan(off, step), false};
    EXPECT_TRUE(e.forward(std::span<const BatchItem>(&item, 1), logits).ok());
    fed += static_cast<int64_t>(step);
  }
  const BatchItem item{id, probe, true};
  EXPECT_TRUE(e.forward(std::span<const BatchItem>(&item, 1), logits).ok());
  EXPECT_EQ(e.sequence(id)->blocks_held(), blocks_per_sequence(pol, 0, eo.block_tokens, eo.max_chunk));
  std::vector<double> nll;
  const int V = m->config.n_vocab;
  for (size_t i = 0; i + 1 < probe.size(); ++i) nll.push_back(nll_of(logits[0].data() + i * V, V, probe[i + 1]));
  return nll;
}

TEST(LongRun, TwoHundredThousandTokensThenProbeMatchesShortStream) {
  auto m = test::stories_gguf();
  const auto tokens = test::read_ids(test::shared("golden/stories260K/tokens.txt"));
  const std::vector<int32_t> src(tokens.begin(), tokens.begin() + 1000);
  const std::vector<int32_t> probe(tokens.begin() + 1600, tokens.begin() + 1900);
  const auto a = probe_after(m, src, 1000, probe);
  const auto b = probe_after(m, src, 200000, probe);
  ASSERT_EQ(a.size(), b.size());
  double worst = 0;
  for (size_t i = 60; i < a.size(); ++i) worst = std::max(worst, std::fabs(a[i] - b[i]));
  EXPECT_LE(worst, 1e-3);
}

}  // namespace
}  // namespace ss
