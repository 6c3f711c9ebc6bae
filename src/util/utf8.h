#pragma once
// UTF-8 helpers: code point splitting and a streaming decoder that never emits
// half a character.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ss {

// Length of the UTF-8 sequence introduced by lead byte c (1 for invalid leads,
// so malformed input still advances).
int utf8_seq_len(unsigned char c);

// Splits text into UTF-8 characters; invalid bytes become 1-byte pieces.
std::vector<std::string> utf8_chars(std::string_view text);

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
