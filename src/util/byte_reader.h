#pragma once
// Bounds-checked little-endian cursor over untrusted bytes. Every read reports
// failure instead of reading past the end.
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <type_traits>

namespace ss {

class ByteReader {
 public:
  explicit ByteReader(std::span<const uint8_t> bytes) : bytes_(bytes) {}

  size_t pos() const { return pos_; }
  size_t size() const { return bytes_.size(); }
  size_t remaining() const { return bytes_.size() - pos_; }
  bool seek(size_t p) {
    if (p > bytes_.size()) return false;
    pos_ = p;
    return true;
  }

  template <typename T>
  bool read(T& out) {
    static_assert(std::is_trivially_copyable_v<T>);
    if (remaining() < sizeof(T)) return false;
    std::memcpy(&out, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return true;
  }

  bool read_bytes(size_t n, std::string& out) {
    if (remaining() < n) return false;
    out.assign(reinterpret_cast<const char*>(bytes_.data() + pos_), n);
    pos_ += n;
    return true;
  }

  bool skip(uint64_t n) {
    if (remaining() < n) return false;
    pos_ += static_cast<size_t>(n);
    return true;
  }

 private:
  std::span<const uint8_t> bytes_;
  size_t pos_ = 0;
};

}  // namespace ss
