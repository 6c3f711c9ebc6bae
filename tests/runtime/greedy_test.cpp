// Greedy generation equals the reference implementations byte for byte, at
// every dispatch level (test.sh runs the suite natively, under
// SINKSTREAM_CPU=avx512 where AMX exists, and under avx2). The float paths
// differ between levels in the last bits of the logits (vector width, FMA),
// so this assumes no step's two best logits lie within that rounding of each
// other; it holds for these models and lengths at native, avx2 and sse4.
#include "model/tokenizer.h"
#include "runtime_helpers.h"

namespace ss {
namespace {

std::string greedy_text(std::shared_ptr<const Model> m, int n, int threads) {
  EngineOptions eo;
  eo.threads = threads;
  eo.kv_blocks = 64;
  Engine e(m, eo);
  const auto ids = test::greedy(e, KvPolicy::dense(), {m->vocab.bos}, n);
  const Tokenizer tok(m->vocab);
  return tok.decode(ids);
}

TEST(Greedy, Stories260KGgufMatchesLlama2c) {
  const auto want = test::rtrim(test::read_file(test::shared("models/stories260K/expected_greedy_t0_n200.txt")));
  EXPECT_EQ(test::rtrim(greedy_text(test::stories_gguf(), 200, 1)), want);
  EXPECT_EQ(test::rtrim(greedy_text(test::stories_gguf(), 200, 2)), want);
}

TEST(Greedy, Stories260KBinMatchesLlama2c) {
  const auto want = test::rtrim(test::read_file(test::shared("models/stories260K/expected_greedy_t0_n256.txt")));
  EXPECT_EQ(test::rtrim(greedy_text(test::stories_bin(), 256, 1)), want);
}

TEST(Greedy, TinyStories656KSafetensorsMatchesReferenceIds) {
  const auto want = test::read_ids(test::shared("models/tinystories-656k/expected_greedy_ids_bos_60.txt"));
  auto m = test::ts656k();
  ASSERT_TRUE(m);
  Engine e(m, EngineOptions{});
  EXPECT_EQ(test::greedy(e, KvPolicy::dense(), {m->vocab.bos}, static_cast<int>(want.size())), want);
}

}  // namespace
}  // namespace ss
