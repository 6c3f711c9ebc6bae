#pragma once
// UTF-8 helpers: code point splitting and a streaming decoder that never emits
// half a character.
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ss {

// Length of the UTF-8 sequence introduced by lead byte c (1 for invalid leads,
// so malformed input still advances).
int utf8_seq_len(unsigned char c);

// Splits text into UTF-8 characters; invalid bytes become 1-byte pieces.
std::vector<std::string> utf8_chars(std::string_view text);

// RFC 3629's table for a byte that starts a character: how many bytes
// follow, the code point bits the lead carries, and the range the first
// following byte must fall in (the others: 0x80-0xBF). The ranges rule out
// overlong forms, surrogates and code points past U+10FFFF. follow == -1: the
// byte cannot start a character (a continuation byte, C0, C1, F5-FF).
struct Utf8Lead {
  int follow;
  uint32_t bits;
  uint8_t lo, hi;
};
constexpr Utf8Lead utf8_lead(unsigned char c) {
  if (c < 0x80) return {0, c, 0x80, 0xBF};
  if (c >= 0xC2 && c <= 0xDF) return {1, c & 0x1Fu, 0x80, 0xBF};
  if (c >= 0xE0 && c <= 0xEF)
    return {2, c & 0x0Fu, static_cast<uint8_t>(c == 0xE0 ? 0xA0 : 0x80), static_cast<uint8_t>(c == 0xED ? 0x9F : 0xBF)};
  if (c >= 0xF0 && c <= 0xF4)
    return {3, c & 0x07u, static_cast<uint8_t>(c == 0xF0 ? 0x90 : 0x80), static_cast<uint8_t>(c == 0xF4 ? 0x8F : 0xBF)};
  return {-1, 0, 0, 0};
}

// The code points a character partly read can still become, [lo, hi]:
// `bits` read so far, `left` continuation bytes to come (1-3), the next of
// which must be in [next_lo, next_hi] (utf8_lead's range, then 0x80-0xBF).
constexpr std::pair<uint32_t, uint32_t> utf8_partial_range(uint32_t bits, int left, uint8_t next_lo, uint8_t next_hi) {
  const int rest = 6 * (left - 1);
  return {((bits << 6) | (next_lo & 0x3Fu)) << rest, (((bits << 6) | (next_hi & 0x3Fu)) << rest) | ((1u << rest) - 1)};
}

// Decodes one code point at s[i]; returns it and advances i (invalid -> U+FFFD, 1 byte).
uint32_t utf8_next(std::string_view s, size_t& i);
void utf8_append(std::string& out, uint32_t cp);

// Accumulates bytes and releases only complete UTF-8 characters. An invalid
// sequence is released as-is once it can no longer become valid.
class Utf8StreamBuffer {
 public:
  std::string push(std::string_view bytes);
  std::string flush();

 private:
  std::string pending_;
};

}  // namespace ss
