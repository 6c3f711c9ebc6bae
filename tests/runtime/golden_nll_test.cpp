// Per-token NLL under every policy equals the independent reference
// implementation's golden files within 2e-3 (STREAMING.md).
#include <cmath>
#include <filesystem>

#include "runtime/scoring.h"
#include "runtime_helpers.h"

namespace ss {
namespace {

struct GoldenCase {
  std::string model_rel, golden_dir;
};

void check_all_golden(const GoldenCase& gc) {
  auto m = test::model_at(gc.model_rel);
  ASSERT_TRUE(m);
  const std::string dir = test::shared("golden/" + gc.golden_dir);
  const auto tokens = test::read_ids(dir + "/tokens.txt");
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("nll_", 0) != 0) continue;
    std::ifstream in(entry.path());
    std::string header;
    std::getline(in, header);
    const auto s = header.find("spec=");
    ASSERT_NE(s, std::string::npos) << name;
    std::string spec = header.substr(s + 5, header.find(' ', s) - s - 5);
    // "recompute:L:N" scores the first N tokens only.
    size_t limit = tokens.size();
    if (spec.rfind("recompute", 0) == 0 && std::count(spec.begin(), spec.end(), ':') == 2) {
      limit = std::stoul(spec.substr(spec.rfind(':') + 1));
      spec = spec.substr(0, spec.rfind(':'));
    }
    auto pol = StreamMode::parse(spec, m->config.trained_context);
    ASSERT_TRUE(pol.ok()) << spec;
    EngineOptions eo;
    eo.threads = 2;
    eo.kv_blocks = test::dense_blocks(limit, 400);
    Engine e(m, eo);
    auto nll = score_tokens(e, std::span<const int32_t>(tokens).subspan(0, limit), pol.value());
    ASSERT_TRUE(nll.ok()) << nll.error().message;
    const auto golden = test::read_nll(entry.path().string());
    ASSERT_EQ(nll->size(), golden.size()) << name;
    double worst = 0;
    for (size_t i = 0; i < golden.size(); ++i) worst = std::max(worst, std::fabs(nll.value()[i] - golden[i]));
    EXPECT_LE(worst, 2e-3) << name;
    ++files;
  }
  EXPECT_GE(files, 4);
}

TEST(GoldenNll, Stories260KAllPolicies) { check_all_golden({"models/stories260K/stories260K.gguf", "stories260K"}); }
TEST(GoldenNll, TinyStories656KAllPolicies) { check_all_golden({"models/tinystories-656k", "tinystories-656k"}); }

TEST(GoldenNll, Stories260KBinDense) {
  auto m = test::stories_bin();
  const auto tokens = test::read_ids(test::shared("golden/stories260K/tokens.txt"));
  EngineOptions eo;
  eo.kv_blocks = test::dense_blocks(tokens.size(), 200);
  Engine e(m, eo);
  auto nll = score_tokens(e, tokens, StreamMode::cached(KvPolicy::dense()));
  ASSERT_TRUE(nll.ok());
  const auto golden = test::read_nll(test::shared("golden/stories260K/nll_dense.txt"));
  for (size_t i = 0; i < golden.size(); ++i) ASSERT_NEAR(nll.value()[i], golden[i], 2e-3) << i;
}

}  // namespace
}  // namespace ss
