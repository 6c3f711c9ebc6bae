#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <optional>

#include "cli/commands.h"
#include "cli/shape_flags.h"
#include "model/tokenizer.h"
#include "runtime/engine.h"
#include "runtime/scoring.h"
#include "util/check.h"
#include "util/mapped_file.h"

namespace ss::cli {

namespace {
std::atomic<bool> g_interrupted{false};
void on_sigint(int) { g_interrupted.store(true); }

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Most recent tokens only, so endless generation stays in constant memory.
class RecentTokens {
 public:
  explicit RecentTokens(size_t keep) : keep_(keep > 0 ? keep : 1) {}
  void push(int32_t t) {
    v_.push_back(t);
    if (v_.size() >= 2 * keep_) v_.erase(v_.begin(), v_.end() - static_cast<std::ptrdiff_t>(keep_));
  }
  std::span<const int32_t> last(size_t n) const {
    n = std::min(n, v_.size());
    return std::span<const int32_t>(v_).subspan(v_.size() - n);
  }

 private:
  size_t keep_;
  std::vector<int32_t> v_;
};
}  // namespace

GenerateCommand::GenerateCommand(CLI::App& app) {
  sub_ = Flags::subcommand(app, "generate", "stream text from a model (endless with a sinks policy)");
  model_.add(sub_);
  policy_.add(sub_, false);
  auto p = sub_.add("-p,--prompt", prompt_, "prompt text (default: start from BOS)");
  sub_.add("-f,--file", prompt_file_, "read the prompt from a file (llama.cpp's -f)").excludes(p);
  sub_.add("-n,--n-predict", n_new_, "new tokens to generate (default: until EOS; with --ignore-eos, for ever)");
  add_sampling_flags(sub_, sampling_, logit_bias_);
  sub_.flag("--ids", ids_, "print generated token ids, one per line, instead of text");
  sub_.flag("--ignore-eos", ignore_eos_, "keep generating past end-of-sequence");
  sub_.add("--kv-blocks", kv_blocks_, "KV pool size in blocks (default: what the policy needs)");
  shape_.add(sub_, "the answer");
}

int GenerateCommand::run() {
  if (!prompt_file_.empty()) {
    auto text = read_text_file(prompt_file_);
    if (!text.ok()) return fail(text.error().message);
    prompt_ = text.value();
  }
  auto model_r = model_.load();
  if (!model_r.ok()) return fail(model_r.error().message);
  const auto model = model_r.value();
  const Tokenizer tok(model->vocab);
  const GbnfTokens refs = gbnf_tokens(tok);
  auto loaded = shape_.load(&refs);
  if (!loaded.ok()) return fail(loaded.error().message);
  const ShapeFlags::Loaded& wanted = loaded.value();
  if (auto st = apply_logit_bias(logit_bias_, model->config.n_vocab, sampling_); !st.ok())
    return fail(st.error().message);
  if (auto st = sampling_.validate(); !st.ok()) return fail(st.error().message);
  auto pols = policy_.resolve(model->config.trained_context);
  if (!pols.ok()) return fail(pols.error().message);
  const StreamMode mode = pols.value()[0];
  // Special-token texts in the prompt are those tokens (llama.cpp's completion tool does the same).
  std::vector<int32_t> prompt = tok.encode(prompt_, model->vocab.add_bos, /*parse_special=*/true);
  if (prompt.empty()) prompt.push_back(model->vocab.bos >= 0 ? model->vocab.bos : 0);

  auto eo_r = engine_options(model_, policy_, model->config);
  if (!eo_r.ok()) return fail(eo_r.error().message);
  EngineOptions eo = eo_r.value();
  const int64_t budget =
      static_cast<int64_t>(prompt.size()) + (n_new_ > 0 ? n_new_ : 4 * model->config.trained_context);
  size_kv_pools(eo, model->config, mode.recompute() ? KvPolicy::dense() : mode.policy,
                mode.recompute() ? mode.recompute_len : budget);
  if (kv_blocks_ > 0) eo.kv_blocks = kv_blocks_;
  Engine engine(model, eo);

  std::optional<Constraint> shape;  // -j / --grammar: the answer so far
  std::unique_ptr<ConstraintVocab> vocab;
  std::vector<float> masked;
  if (wanted.any()) {
    shape.emplace(wanted.schema, wanted.grammar);
    vocab = ConstraintVocab::of(*model, tok);
  }

  std::signal(SIGINT, on_sigint);
  Sampler sampler(sampling_);
  Detokenizer detok(tok);
  RecentTokens recent(static_cast<size_t>(std::max<int64_t>(sampling_.repeat_last_n, mode.recompute_len)) + 1);
  for (int32_t t : prompt) recent.push(t);
  if (!ids_) {
    for (int32_t t : prompt) write_text(detok.push(t), stdout);
    std::fflush(stdout);
  }

  SeqId seq = -1;
  if (!mode.recompute()) {
    auto created = engine.create_sequence(mode.policy);
    if (!created.ok()) return fail(created.error().message);
    seq = created.value();
  }
  std::vector<std::vector<float>> logits;
  auto step = [&](std::span<const int32_t> toks) -> Status {
    if (mode.recompute()) {
      SS_ASSIGN_OR_RETURN(auto lg, recompute_logits(engine, recent.last(static_cast<size_t>(mode.recompute_len))));
      logits.assign(1, std::move(lg));
      return ok_status();
    }
    const BatchItem item{seq, toks, false};
    return engine.forward(std::span<const BatchItem>(&item, 1), logits);
  };

  const auto t0 = std::chrono::steady_clock::now();
  if (auto st = step(prompt); !st.ok()) {
    std::fprintf(stderr, "\nerror: %s\n", st.error().message.c_str());
    return 1;
  }
  const double prefill_s = seconds_since(t0);
  const auto t1 = std::chrono::steady_clock::now();
  int64_t generated = 0;
  int rc = 0;
  while (!g_interrupted.load() && (n_new_ < 0 || generated < n_new_)) {
    const auto history = recent.last(static_cast<size_t>(sampling_.repeat_last_n));
    int32_t next = -1;
    if (shape) {  // only tokens that keep the answer a prefix of one the schema or grammar accepts
      next = sample_shaped(
          *shape, *vocab, logits[0], masked, !ignore_eos_,
          [&](std::span<const float> l) { return sampler.sample(l, history); },
          [&](int32_t t) { return !ignore_eos_ && model->vocab.is_eog(t); });
      if (next < 0) break;
    } else {
      next = sampler.sample(logits[0], history);
    }
    if (!ignore_eos_ && model->vocab.is_eog(next)) break;
    ++generated;
    recent.push(next);
    if (ids_)
      std::printf("%d\n", next);
    else
      write_text(detok.push(next), stdout);
    std::fflush(stdout);
    if (n_new_ >= 0 && generated >= n_new_) break;
    if (shape && shape->complete()) break;
    const int32_t one[1] = {next};
    if (auto st = step(one); !st.ok()) {
      std::fprintf(stderr, "\nerror: %s\n", st.error().message.c_str());
      rc = 1;
      break;
    }
  }
  const double decode_s = seconds_since(t1);
  if (!ids_) write_text(detok.flush() + "\n", stdout);
  std::fflush(stdout);
  std::fprintf(
      stderr,
      "\n[sinkstream] policy %s | prefill %zu tok in %.3f s (%s tok/s) | decode %lld tok in %.3f s (%s tok/s)%s\n",
      mode.name().c_str(), prompt.size(), prefill_s, format_rate(prompt.size() / std::max(prefill_s, 1e-9)).c_str(),
      static_cast<long long>(generated), decode_s, format_rate(generated / std::max(decode_s, 1e-9)).c_str(),
      g_interrupted.load() ? " | interrupted" : "");
  return rc;
}

}  // namespace ss::cli
