#include "util/utf8.h"

namespace ss {

int utf8_seq_len(unsigned char c) {
  if (c < 0x80) return 1;
  if ((c & 0xE0) == 0xC0) return 2;
  if ((c & 0xF0) == 0xE0) return 3;
  if ((c & 0xF8) == 0xF0) return 4;
  return 1;
}

static bool is_cont(unsigned char c) { return (c & 0xC0) == 0x80; }

std::vector<std::string> utf8_chars(std::string_view text) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < text.size()) {
    int n = utf8_seq_len(static_cast<unsigned char>(text[i]));
    if (i + n > text.size()) n = 1;
    for (int k = 1; k < n; ++k) {
      if (!is_cont(static_cast<unsigned char>(text[i + k]))) {
        n = 1;
        break;
      }
    }
    out.emplace_back(text.substr(i, n));
    i += n;
  }
  return out;
}

uint32_t utf8_next(std::string_view s, size_t& i) {
  const auto c = static_cast<unsigned char>(s[i]);
  int n = utf8_seq_len(c);
  if (n == 1) {
    ++i;
    return c < 0x80 ? c : 0xFFFD;
  }
  if (i + n > s.size()) {
    ++i;
    return 0xFFFD;
  }
  uint32_t cp = c & (0x7F >> n);
  for (int k = 1; k < n; ++k) {
    const auto cc = static_cast<unsigned char>(s[i + k]);
    if (!is_cont(cc)) {
      ++i;
      return 0xFFFD;
    }
    cp = (cp << 6) | (cc & 0x3F);
  }
  i += n;
  return cp;
}

void utf8_append(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

std::string Utf8StreamBuffer::push(std::string_view bytes) {
  pending_.append(bytes);
  std::string out;
  size_t i = 0;
  while (i < pending_.size()) {
    const auto c = static_cast<unsigned char>(pending_[i]);
    const int n = utf8_seq_len(c);
    if (n == 1) {
      out += pending_[i++];
      continue;
    }
    // Check the continuation bytes we have so far.
    size_t have = 1;
    bool bad = false;
    while (have < static_cast<size_t>(n) && i + have < pending_.size()) {
      if (!is_cont(static_cast<unsigned char>(pending_[i + have]))) {
        bad = true;
        break;
      }
      ++have;
    }
    if (bad) {  // cannot become valid: release the lead byte alone
      out += pending_[i++];
      continue;
    }
    if (have < static_cast<size_t>(n)) break;  // incomplete: wait for more
    out.append(pending_, i, n);
    i += n;
  }
  pending_.erase(0, i);
  return out;
}

std::string Utf8StreamBuffer::flush() {
  std::string out;
  out.swap(pending_);
  return out;
}

}  // namespace ss
