#pragma once
// Appending little-endian values to a byte buffer: the writing side of
// ByteReader (file headers, session records).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

namespace ss {

// resize + memcpy rather than vector::insert: GCC 12 warns (falsely) that an
// insert of a few bytes overflows.
inline void put_bytes(std::vector<uint8_t>& b, const void* p, size_t n) {
  const size_t at = b.size();
  b.resize(at + n);
  if (n) std::memcpy(b.data() + at, p, n);
}

template <typename T>
void put(std::vector<uint8_t>& b, T v) {
  static_assert(std::is_trivially_copyable_v<T>);
  put_bytes(b, &v, sizeof(T));
}

}  // namespace ss
