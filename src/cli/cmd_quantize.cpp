// quantize and convert: both write a GGUF through model/gguf_export.h, one
// choosing llama.cpp's quantized types, the other keeping the weights'
// precision while moving an HF directory into llama.cpp's file format.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>

#include "cli/commands.h"
#include "cli/progress.h"
#include "model/gguf_export.h"
#include "util/mapped_file.h"
#include "util/thread_count.h"

namespace ss::cli {

namespace {

constexpr const char* kThreadsHelp =
    "worker threads (default: one per logical CPU this process may use, within its cgroup CPU limit; "
    "$SINKSTREAM_THREADS overrides)";

int default_threads(int asked) { return asked > 0 ? asked : default_thread_count(CpuUse::LogicalCpus).threads; }

int run_export(const std::string& in, const std::string& out, const QuantTarget& target, int threads,
               bool allow_requantize, const std::string& chat_template) {
  const auto t0 = std::chrono::steady_clock::now();
  auto src = open_export_source(in, chat_template);
  if (!src.ok()) return fail(src.error().message);
  std::fprintf(stderr, "%s: %s, %zu tensors -> %s (%s), %d threads\n", in.c_str(), src.value().description.c_str(),
               src.value().tensors.size(), out.c_str(), target.name.c_str(), threads);
  Progress progress(target.name, stderr_is_tty(), "K weights");
  ExportOptions opt;
  opt.target = target;
  opt.threads = threads;
  opt.allow_requantize = allow_requantize;
  opt.progress = [&](int64_t done, int64_t total) { progress.update(done >> 10, total >> 10, ""); };
  opt.log = [&](const std::string& line) { std::fprintf(stderr, "  %s\n", line.c_str()); };
  auto sum = write_gguf_export(src.value(), opt, out);
  progress.finish();
  if (!sum.ok()) return fail(sum.error().message);
  const auto& s = sum.value();
  std::string types;
  for (const auto& [name, n] : s.type_counts) types += (types.empty() ? "" : ", ") + name + " x" + std::to_string(n);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::fprintf(stderr, "wrote %s: %lld tensors (%s), %.2f MiB -> %.2f MiB of weights, %.2f bits/weight, %.1f s\n",
               out.c_str(), static_cast<long long>(s.tensors), types.c_str(), static_cast<double>(s.bytes_in) / 1048576,
               static_cast<double>(s.bytes_out) / 1048576,
               s.weights > 0 ? 8.0 * static_cast<double>(s.bytes_out) / static_cast<double>(s.weights) : 0.0, secs);
  return 0;
}

}  // namespace

QuantizeCommand::QuantizeCommand(CLI::App& app) {
  sub_ = Flags::subcommand(app, "quantize",
                           "quantize a model (F32/F16/BF16 GGUF or HF directory) to a GGUF of llama.cpp's types, with "
                           "ggml's choice of scales and llama.cpp's per-tensor rules");
  sub_.add("input", in_, "model: .gguf or HF directory").required();
  sub_.add("output", out_, "output .gguf").required();
  sub_.add("type", type_, quant_target_names()).required();
  sub_.add("-t,--threads", threads_, kThreadsHelp).range(1, 256);
  sub_.flag("--pure", pure_, "every quantized tensor the same type: no K-quant mixes, no Q6_K output");
  sub_.flag("--allow-requantize", allow_requantize_,
            "accept already-quantized tensors (decoded, then quantized again: precision is lost twice)");
  sub_.footer(
      "Rules as llama.cpp's llama-quantize (no importance matrix): norms and biases stay F32; the output matrix "
      "takes Q6_K (Q8_0 for q8_0); q4_k_m/q5_k_m give attn_v and ffn_down Q6_K in the first and last eighth of the "
      "layers and every third between; rows that do not fit a type's block fall back (Q4_K->Q5_0, Q5_K->Q5_1, "
      "Q6_K->Q8_0, else F16). Example: sinkstream quantize model-f16.gguf model-q4_k_m.gguf q4_k_m");
}

int QuantizeCommand::run() {
  auto target = parse_quant_target(type_);
  if (!target.ok()) return fail(target.error().message);
  QuantTarget t = target.value();
  t.pure = pure_;
  return run_export(in_, out_, t, default_threads(threads_), allow_requantize_, "");
}

ConvertCommand::ConvertCommand(CLI::App& app) {
  sub_ = Flags::subcommand(app, "convert",
                           "convert a Hugging Face model directory (config.json, *.safetensors, tokenizer.json) to "
                           "GGUF, with the tokenizer and chat template in llama.cpp's keys");
  sub_.add("input", in_, "HF model directory").required();
  sub_.add("output", out_, "output .gguf").required();
  sub_.add("--outtype", outtype_,
           "weight type: auto (as stored: lossless), f32, f16, bf16, or any quantize type (" + quant_target_names() +
               ")")
      .show_default();
  sub_.add("--chat-template", chat_template_,
           "file with a Jinja chat template to embed (default: tokenizer_config.json's, if any)");
  sub_.add("-t,--threads", threads_, kThreadsHelp).range(1, 256);
}

int ConvertCommand::run() {
  std::string tmpl;
  if (!chat_template_.empty()) {
    auto text = read_text_file(chat_template_);
    if (!text.ok()) return fail(text.error().message);
    tmpl = text.value();
  }
  std::string type = outtype_;
  if (type == "auto") {
    // The first matrix's type: F32 / F16 / BF16 checkpoints stay as they are.
    auto src = open_export_source(in_, "");
    if (!src.ok()) return fail(src.error().message);
    type = "f32";
    for (const auto& t : src.value().tensors)
      if (t.ne.size() >= 2) {
        type = t.type == GgmlType::F16 ? "f16" : t.type == GgmlType::BF16 ? "bf16" : "f32";
        break;
      }
  }
  auto target = parse_quant_target(type);
  if (!target.ok()) return fail(target.error().message);
  return run_export(in_, out_, target.value(), default_threads(threads_), false, tmpl);
}

}  // namespace ss::cli
