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

// Asks the kernel to reclaim the resident pages of these bytes (whole pages
// inside the range only; MADV_PAGEOUT: contents are kept and come back on the
// next read). For mapped weights a process no longer reads, so they stop
// counting in its resident memory. A hint: ignored where unsupported.
void release_resident_pages(const void* data, size_t bytes);

// `bytes` of zeroed memory aligned to 2 MiB and advised to use transparent
// huge pages (MADV_HUGEPAGE), for large buffers read end to end every token:
// 512 times fewer TLB misses than 4 KiB pages. Freed with the last owner.
std::shared_ptr<uint8_t> allocate_huge(size_t bytes);
// Faults in every page of [p, p + bytes) now (one write of zero per 4 KiB
// page: the memory must be zeroed or unused), so later first touches do
// not stall on the kernel.
void touch_pages(uint8_t* p, size_t bytes);
// Physical memory not in use now (free pages, not counting caches); 0 if
// unknown.
size_t free_memory_bytes();

// Whole file into a string (small text files: config.json, tokenizer.json).
Result<std::string> read_text_file(const std::string& path);

}  // namespace ss
