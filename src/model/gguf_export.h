#pragma once
// Writes a model as a GGUF file with every weight in the type a QuantTarget
// chooses (model/quant_plan.h): the engine behind `sinkstream quantize` and
// `sinkstream convert`. Sources: a GGUF file (its metadata copied as is) or
// a Hugging Face directory (config.json, safetensors, tokenizer.json and
// tokenizer_config.json's chat template, in llama.cpp's keys and names).
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "format/gguf_writer.h"
#include "model/quant_plan.h"
#include "util/result.h"

namespace ss {

struct ExportTensor {
  std::string name;
  std::vector<int64_t> ne;  // ne[0] = row length
  GgmlType type;            // as stored in the source
  const uint8_t* data = nullptr;
  // HF Llama q/k rows come in rotate-half order per head; GGUF's llama
  // rope pairs neighbours (llama.cpp's converter permutes them the same way).
  int permute_heads = 0;
};

struct ExportSource {
  GgufWriter meta;  // the output's metadata, no tensors yet
  std::vector<ExportTensor> tensors;
  QuantModelInfo info;
  std::string description;  // "GGUF llama" / "HF llama"
  std::vector<std::shared_ptr<const void>> keep_alive;
};

Result<ExportSource> export_source_gguf(const std::string& path);
// chat_template: replaces (or supplies) tokenizer_config.json's template.
Result<ExportSource> export_source_hf(const std::string& dir, const std::string& chat_template = "");
// A directory is read as HF, anything else as GGUF.
Result<ExportSource> open_export_source(const std::string& path, const std::string& chat_template = "");

struct ExportOptions {
  QuantTarget target;
  bool allow_requantize = false;  // re-quantize quantized source tensors (loses precision twice)
  int threads = 1;
  // Called on the caller's thread: weights written so far of total.
  std::function<void(int64_t done, int64_t total)> progress;
  // One line per tensor whose type differs from the target's (rule or fallback).
  std::function<void(const std::string&)> log;
};

struct ExportSummary {
  int64_t tensors = 0, weights = 0;
  uint64_t bytes_in = 0, bytes_out = 0;                  // tensor data only
  std::vector<std::pair<std::string, int>> type_counts;  // type name -> tensors
};

// Writes OUT whole or not at all (util/atomic_file.h: a temporary beside it,
// fsynced and renamed), so a failure never leaves a partial file under the
// asked-for name.
Result<ExportSummary> write_gguf_export(const ExportSource& src, const ExportOptions& opt, const std::string& out);

}  // namespace ss
