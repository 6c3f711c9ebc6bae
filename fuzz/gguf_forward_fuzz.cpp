// A GGUF file that loads is then run: an engine over it (int8 activations,
// Q8_0 KV where the model's rows allow, else F16), a sink-window sequence fed
// a few tokens in one chunk and then one at a time past the window (so the
// cache evicts), the logits sampled. Corpus: stories260K and the tiny
// random models of every architecture in ../shared/golden/arch, so mutations
// reach each architecture's hyper-parameters and tensors. A model the loader
// accepts must run without crashing; whatever its weights hold (NaN and
// infinities included), every sampled token is in the vocabulary.
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "fuzz_files.h"
#include "kv/policy.h"
#include "model/model.h"
#include "runtime/engine.h"
#include "sample/sampler.h"

namespace {
[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "model run invariant broken: %s\n", what.c_str());
  std::abort();
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = ss::fuzz::write_file("run.gguf", {reinterpret_cast<const char*>(data), size});
  auto m = ss::load_model({path, ""});
  if (!m.ok()) return 0;
  const std::shared_ptr<const ss::Model> model = m.value();
  const ss::ModelConfig& c = model->config;
  const int32_t n_vocab = c.n_vocab;
  if (n_vocab <= 0) fail("a model without a vocabulary loaded");
  auto policy = ss::KvPolicy::parse("sinks:2:6", 0);
  if (!policy.ok()) fail("policy: " + policy.error().message);
  ss::EngineOptions eo;
  eo.kv_blocks = 8;
  eo.block_tokens = 4;
  eo.act_quant = ss::ActQuant::Int8;
  eo.kv_type = ss::kv_type_usable(ss::GgmlType::Q8_0, c.kv_dim()).ok() ? ss::GgmlType::Q8_0 : ss::GgmlType::F16;
  ss::Engine engine(model, eo);
  auto seq = engine.create_sequence(policy.value());
  if (!seq.ok()) return 0;  // e.g. a sliding window the pool cannot hold: an error, as it should be
  ss::Sampler sampler(ss::SamplingParams{});
  std::vector<int32_t> history = {0, 1 % n_vocab, 2 % n_vocab};
  std::vector<std::vector<float>> logits;
  for (int step = 0; step < 8; ++step) {
    const std::span<const int32_t> feed =
        step == 0 ? std::span<const int32_t>(history) : std::span<const int32_t>(&history.back(), 1);
    const ss::BatchItem item{seq.value(), feed};
    if (!engine.forward(std::span<const ss::BatchItem>(&item, 1), logits).ok()) break;
    if (logits.size() != 1 || logits[0].size() != static_cast<size_t>(n_vocab)) fail("logits of the wrong shape");
    const int32_t t = sampler.sample(logits[0], history);
    if (t < 0 || t >= n_vocab) fail("sampled a token outside the vocabulary");
    history.push_back(t);
  }
  engine.free_sequence(seq.value());
  return 0;
}
