#include "cli/common.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>

#include "model/story_text.h"
#include "ops/kernel_report.h"
#include "ops/matmul.h"
#include "runtime/kernel_layouts.h"
#include "util/mapped_file.h"
#include "util/thread_count.h"

namespace ss::cli {

std::string shared_dir() {
  if (const char* e = std::getenv("SINKSTREAM_SHARED"); e && *e) return e;
  return "../shared";
}

std::string default_model_path() {
  if (const char* e = std::getenv("SINKSTREAM_MODEL"); e && *e) return e;
  return shared_dir() + "/models/stories260K/stories260K.gguf";
}

void ModelFlags::add(Flags& app) {
  model = default_model_path();
  app.add("-m,--model", model, "model: .gguf, llama2.c .bin, or HF directory ($SINKSTREAM_MODEL)").show_default();
  app.add("-z,--tokenizer", tokenizer, "llama2.c tokenizer.bin (default: next to the model)");
  const ThreadCountChoice choice = default_thread_count();
  threads = choice.threads;
  app.add("-t,--threads", threads,
          "worker threads (default: one per physical core this process may use, as llama.cpp: " + choice.why +
              "; $SINKSTREAM_THREADS overrides)")
      .range(1, 256)
      .show_default();
  app.add("--act-quant", act_quant,
          "activations meeting Q4_0/Q8_0/Q4_K/Q5_K/Q6_K weights: int8 (default: rounded per block of 32 as "
          "llama.cpp does, on AVX-512 VNNI/AMX or AVX2; the float path on older CPUs), none (exact floats: "
          "the reference path) or fast (int8 for fewer than " +
              std::to_string(kBf16MinRows) +
              " rows; larger batches as bf16 weights x bf16 "
              "activations on AMX-BF16 for Q4_0/Q8_0). F32/F16/BF16 weights always take the float path")
      .one_of({"none", "int8", "fast"})
      .show_default();
}

Result<std::shared_ptr<const Model>> ModelFlags::load() const {
  // Which kernels run, before anything else: a log or a bug report says which path ran.
  std::fprintf(stderr, "system_info: %s | threads %d | act-quant %s\n", format_kernel_report(kernel_report()).c_str(),
               threads, act_quant.c_str());
  SS_ASSIGN_OR_RETURN(auto m, load_model(ModelLoadOptions{model, tokenizer}));
  return with_kernel_layouts(std::move(m), activation_quant());  // once, shared by every engine
}

void PolicyFlags::add(Flags& app, bool many) {
  if (many)
    app.add("--policy", policies, "KV policy: dense, window:W, sinks:S:W, recompute:L (repeatable)");
  else
    app.add("--policy", policies, "KV policy: dense, window:W, sinks:S:W, recompute:L").expected(1);
  app.add("--sinks", sinks, "shorthand: sinks:S:W with --window").range(0, 1 << 20);
  app.add("--window", window, "shorthand: window size W").range(1, 1 << 24);
  app.add("-c,--ctx-size", ctx_size,
          "llama.cpp's -c: tokens the cache holds, sinks included (sinks:S:(N-S); S from --keep/--sinks, "
          "default 4). Unlike llama.cpp, generation goes on past N: the oldest non-sink tokens are evicted")
      .range(2LL, 1LL << 24);
  app.add("--keep", keep,
          "llama.cpp's --keep: tokens kept from the start for ever = the attention sinks (same as --sinks). "
          "Unlike llama.cpp, -1 (keep the whole prompt) is not supported")
      .range(0, 1 << 20);
  app.add("--chunk", chunk, "prefill chunk size (tokens per step)").range(1, 1 << 16).show_default();
  app.add("--sink-logit", sink_logit,
          "add a virtual sink with this logit to every head's softmax (0 = softmax1; on top of learned sinks)")
      .range(-1000.0, 1000.0);
  app.add("--kv-type", kv_type,
          "KV cache element type: f32, f16, bf16, q8_0, q4_0 (ggml's blocks of 32; the rows a model caches "
          "must be a multiple of 32 wide)")
      .one_of({"f32", "f16", "bf16", "q8_0", "q4_0"})
      .show_default();
}

Result<EngineOptions> engine_options(const ModelFlags& m, const PolicyFlags& p, const ModelConfig& c) {
  EngineOptions eo;
  eo.threads = m.threads;
  eo.act_quant = m.activation_quant();
  eo.max_chunk = p.chunk;
  eo.sink_logit = p.sink_logit;
  SS_ASSIGN_OR_RETURN(eo.kv_type, parse_kv_type(p.kv_type));
  SS_TRY(kv_type_usable(eo.kv_type, c.kv_dim()));
  return eo;
}

Result<std::vector<StreamMode>> PolicyFlags::resolve(int64_t ctx) const {
  std::vector<StreamMode> out;
  for (const auto& p : policies) {
    SS_ASSIGN_OR_RETURN(auto mode, StreamMode::parse(p, ctx));
    out.push_back(mode);
  }
  if (keep >= 0 && sinks >= 0) return make_error("--keep and --sinks say the same thing: give one");
  if (ctx_size > 0 && window >= 0) return make_error("use either -c/--ctx-size or --window, not both");
  const int n_sinks = keep >= 0 ? keep : sinks;
  if (n_sinks >= 0 || window >= 0 || ctx_size > 0) {
    if (!policies.empty()) return make_error("use either --policy or --sinks/--window/-c/--keep, not both");
    const int64_t s = n_sinks >= 0 ? n_sinks : 4;
    const int64_t w = window >= 0 ? window : (ctx_size > 0 ? ctx_size : ctx) - s;
    if (w < 1) return make_error("window must be >= 1");
    out.push_back(StreamMode::cached(KvPolicy::sinks_window(s, w)));
  }
  if (out.empty()) out.push_back(StreamMode::cached(KvPolicy::sinks_window(4, ctx > 8 ? ctx - 4 : 4)));
  return out;
}

Result<std::string> read_eval_text(const std::string& path, bool raw) {
  SS_ASSIGN_OR_RETURN(std::string text, read_text_file(path));
  return raw ? text : join_stories(text);
}

int fail(const std::string& msg) {
  std::fprintf(stderr, "error: %s\n", msg.c_str());
  return 1;
}

// CMake defines both for the sinkstream target; a bare compile (the Arm
// cross-compile check) gets placeholders.
#ifndef SS_VERSION
#define SS_VERSION "unknown"
#endif
#ifndef SS_BUILD_TYPE
#define SS_BUILD_TYPE "unknown build"
#endif

std::string version_string() {
  std::string compiler =
#if defined(__clang__)
      "clang " __clang_version__;
#elif defined(__GNUC__)
      "GCC " __VERSION__;
#else
      "unknown compiler";
#endif
  return std::string("sinkstream ") + SS_VERSION + " (" + compiler + ", " + SS_BUILD_TYPE + ")";
}

void add_sampling_flags(Flags& app, SamplingParams& s, std::vector<std::string>& logit_bias) {
  app.add("-l,--logit-bias", logit_bias,
          "TOKEN_ID(+/-)BIAS added to that token's logit, e.g. 15043+1, 15043-inf (never it); repeatable");
  app.add("--temp", s.temperature, "temperature (0 = greedy)").show_default();
  app.add("--top-k", s.top_k, "top-k (0 = off)").show_default();
  app.add("--top-p", s.top_p, "top-p (1 = off)").show_default();
  app.add("--min-p", s.min_p, "min-p (0 = off)").show_default();
  app.add("--repeat-penalty", s.repeat_penalty, "repetition penalty (1 = off)").show_default();
  app.add("--repeat-last-n", s.repeat_last_n, "tokens the penalties look back").show_default();
  app.add("--frequency-penalty", s.frequency_penalty, "subtracted per occurrence in the last repeat-last-n tokens")
      .show_default();
  app.add("--presence-penalty", s.presence_penalty, "subtracted once from tokens in the last repeat-last-n")
      .show_default();
  app.add("--seed", s.seed, "random seed").show_default();
}

Status apply_logit_bias(const std::vector<std::string>& specs, int32_t n_vocab, SamplingParams& s) {
  for (const std::string& spec : specs) {
    const size_t sign = spec.find_first_of("+-", 1);
    const auto bad = [&](const std::string& why) {
      return make_error("--logit-bias '" + spec + "': " + why + " (TOKEN_ID(+/-)BIAS, e.g. 15043+1 or 15043-inf)");
    };
    if (sign == std::string::npos || sign == 0) return bad("no sign between the token id and the bias");
    int64_t id = -1;
    const std::string id_text = spec.substr(0, sign);
    auto [end, ec] = std::from_chars(id_text.data(), id_text.data() + id_text.size(), id);
    if (ec != std::errc() || end != id_text.data() + id_text.size()) return bad("the token id is not a number");
    if (id < 0 || id >= n_vocab) return bad("token id out of range [0, " + std::to_string(n_vocab) + ")");
    const std::string value = spec.substr(sign + 1);
    float bias = 0;
    if (value == "inf") {
      if (spec[sign] == '+') return bad("+inf would force the token: give a large finite bias");
      bias = -std::numeric_limits<float>::max();  // finite (the sampler takes only those), and never sampled
    } else {
      char* stop = nullptr;
      bias = std::strtof(value.c_str(), &stop);
      if (value.empty() || stop != value.c_str() + value.size() || !std::isfinite(bias))
        return bad("the bias is not a number");
      if (spec[sign] == '-') bias = -bias;
    }
    s.logit_bias.emplace_back(static_cast<int32_t>(id), bias);
  }
  return ok_status();
}

std::string format_rate(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

void write_text(const std::string& text, std::FILE* f) { std::fwrite(text.data(), 1, text.size(), f); }

}  // namespace ss::cli
