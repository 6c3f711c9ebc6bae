#pragma once
// Hugging Face safetensors reader (single file or sharded via
// model.safetensors.index.json). Tensor data stays memory-mapped.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "format/tensor.h"
#include "util/mapped_file.h"
#include "util/result.h"

namespace ss {

struct SafetensorsEntry {
  std::string dtype;  // "F32", "F16", "BF16"
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;
  size_t nbytes = 0;
  std::string file;
};

class SafetensorsSet {
 public:
  // Opens one .safetensors file.
  static Result<SafetensorsSet> open_file(const std::string& path);
  // Opens a model directory: model.safetensors, or the shards named by
  // model.safetensors.index.json.
  static Result<SafetensorsSet> open_dir(const std::string& dir);
  // Parses one file's bytes (exposed for tests and fuzzing).
  Status add(std::shared_ptr<MappedFile> file);

  bool has(const std::string& name) const { return entries_.count(name) != 0; }
  // 1-D or 2-D view; shape [rows, cols] in HF order becomes ne0=cols, ne1=rows.
  Result<TensorView> tensor(const std::string& name) const;
  const std::map<std::string, SafetensorsEntry>& entries() const { return entries_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  std::vector<std::shared_ptr<MappedFile>> files_;
  std::map<std::string, SafetensorsEntry> entries_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace ss
