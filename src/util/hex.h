#pragma once
// Hex digits as the grammar and regex readers take them (\xHH, \uHHHH).
#include <cstdint>
#include <string_view>

namespace ss {

// The value of hex digit c, or -1.
constexpr int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Reads `digits` hex digits of s from p into value; p stops at the first
// byte that is not one (false then).
constexpr bool read_hex(std::string_view s, size_t& p, int digits, uint32_t& value) {
  value = 0;
  for (int i = 0; i < digits; ++i, ++p) {
    const int v = p < s.size() ? hex_value(s[p]) : -1;
    if (v < 0) return false;
    value = value * 16 + static_cast<uint32_t>(v);
  }
  return true;
}

}  // namespace ss
