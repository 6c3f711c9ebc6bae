#pragma once
// Shared CLI plumbing: default model paths, model loading flags, policy flags.
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/flags.h"
#include "kv/policy.h"
#include "model/model.h"
#include "ops/matmul.h"
#include "runtime/engine.h"
#include "runtime/stream_mode.h"
#include "sample/sampler.h"

namespace ss::cli {

// ../shared, or $SINKSTREAM_SHARED when set.
std::string shared_dir();
std::string default_model_path();

struct ModelFlags {
  std::string model;
  std::string tokenizer;
  int threads = 1;
  std::string act_quant = "int8";  // llama.cpp's arithmetic; "none" is the exact reference
  void add(Flags& app);
  ActQuant activation_quant() const {
    return act_quant == "int8" ? ActQuant::Int8 : act_quant == "fast" ? ActQuant::Fast : ActQuant::None;
  }
  Result<std::shared_ptr<const Model>> load() const;
};

struct PolicyFlags {
  std::vector<std::string> policies;
  int sinks = -1;
  int window = -1;
  long long ctx_size = 0;  // -c: llama.cpp's context size = the cache's tokens (sinks + window)
  int keep = -1;           // --keep: llama.cpp's kept prompt tokens = the sinks
  // Prefill tokens per step: 256 decodes each quantized weight group once
  // for four times the rows 64 did (TinyLlama pp512 +7-10%); the server
  // keeps 64, so one prompt's step delays the other streams' tokens less.
  int chunk = 256;
  std::optional<float> sink_logit;  // --sink-logit: a virtual sink in every head
  std::string kv_type = "f16";      // --kv-type: the KV cache's element type
  void add(Flags& app, bool many);
  // Policies named by --policy (or --sinks/--window), defaulting to sinks:4:(ctx-4).
  Result<std::vector<StreamMode>> resolve(int64_t trained_context) const;
};

// Engine options every command shares: threads, activations, prefill chunk,
// virtual sink, KV type (kv_blocks is left to the command). Errors: a KV
// type this model's rows cannot hold.
Result<EngineOptions> engine_options(const ModelFlags& m, const PolicyFlags& p, const ModelConfig& c);

// --temp --top-k --top-p --min-p --repeat-penalty --repeat-last-n --seed,
// and llama.cpp's -l/--logit-bias TOKEN_ID(+/-)BIAS into `logit_bias`.
void add_sampling_flags(Flags& app, SamplingParams& s, std::vector<std::string>& logit_bias);
// The -l specs into s.logit_bias, once the vocabulary size is known:
// "15043+1", "15043-0.5", "15043-inf" (never that token). Errors name the spec.
Status apply_logit_bias(const std::vector<std::string>& specs, int32_t n_vocab, SamplingParams& s);

std::string format_rate(double per_second);

// Writes every byte of text to f: generated text may hold a NUL (a <0x00>
// byte token), where fputs would stop.
void write_text(const std::string& text, std::FILE* f);

// "sinkstream 0.9.0 (GCC 12.2.0, Release)".
std::string version_string();

// An evaluation text file: as-is with raw, else TinyStories stories joined
// as STREAMING.md defines.
Result<std::string> read_eval_text(const std::string& path, bool raw);

// Prints "error: MSG" to stderr; returns the exit code 1.
int fail(const std::string& msg);

}  // namespace ss::cli
