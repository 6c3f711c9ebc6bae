#include "util/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <new>
#include <sstream>

namespace ss {

Result<std::shared_ptr<MappedFile>> MappedFile::open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return make_error(path + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return make_error(path + ": not a regular file");
  }
  std::shared_ptr<MappedFile> f(new MappedFile());
  f->path_ = path;
  f->size_ = static_cast<size_t>(st.st_size);
  if (f->size_ > 0) {
    void* p = mmap(nullptr, f->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      ::close(fd);
      return make_error(path + ": mmap failed: " + std::strerror(errno));
    }
    f->data_ = static_cast<const uint8_t*>(p);
  }
  ::close(fd);
  return f;
}

MappedFile::~MappedFile() {
  if (data_) munmap(const_cast<uint8_t*>(data_), size_);
}

void release_resident_pages(const void* data, size_t bytes) {
#ifdef MADV_PAGEOUT
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const auto begin = (reinterpret_cast<uintptr_t>(data) + page - 1) / page * page;
  const auto end = (reinterpret_cast<uintptr_t>(data) + bytes) / page * page;
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_PAGEOUT);
#else
  (void)data;
  (void)bytes;
#endif
}

std::shared_ptr<uint8_t> allocate_huge(size_t bytes) {
  constexpr size_t kHuge = size_t{2} << 20;
  const size_t size = std::max<size_t>(kHuge, (bytes + kHuge - 1) / kHuge * kHuge);
  void* p = mmap(nullptr, size + kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  // Trim the mapping to a 2 MiB-aligned start so whole huge pages fit.
  const auto raw = reinterpret_cast<uintptr_t>(p);
  const uintptr_t start = (raw + kHuge - 1) / kHuge * kHuge;
  if (start > raw) munmap(p, start - raw);
  if (raw + kHuge > start) munmap(reinterpret_cast<void*>(start + size), raw + kHuge - start);
#ifdef MADV_HUGEPAGE
  madvise(reinterpret_cast<void*>(start), size, MADV_HUGEPAGE);
#endif
  return std::shared_ptr<uint8_t>(reinterpret_cast<uint8_t*>(start), [size](uint8_t* q) { munmap(q, size); });
}

void touch_pages(uint8_t* p, size_t bytes) {
  constexpr size_t kPage = 4096;
  for (size_t off = 0; off < bytes; off += kPage) reinterpret_cast<volatile uint8_t*>(p)[off] = 0;
}

size_t free_memory_bytes() {
  const long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<size_t>(pages) * static_cast<size_t>(page) : 0;
}

Result<std::string> read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(path + ": cannot open");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace ss
