#pragma once
// Read-only memory map of a whole file (model weights are used in place).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "util/result.h"

namespace ss {

class MappedFile {
 public:
  static Result<std::shared_ptr<MappedFile>> open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  std::span<const uint8_t> bytes() const { return {data_, size_}; }
  const std::string& path() const { return path_; }

 private:
  MappedFile() = default;
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

// Whole file into a string (small text files: config.json, tokenizer.json).
Result<std::string> read_text_file(const std::string& path);

}  // namespace ss
