#include "model/story_text.h"

#include <vector>

namespace ss {

namespace {
std::string_view trim(std::string_view s) {
  const char* ws = " \t\r\n";
  const auto b = s.find_first_not_of(ws);
  if (b == std::string_view::npos) return {};
  const auto e = s.find_last_not_of(ws);
  return s.substr(b, e - b + 1);
}
}  // namespace

std::string join_stories(std::string_view raw) {
  constexpr std::string_view kSep = "<|endoftext|>";
  std::vector<std::string_view> pieces;
  size_t start = 0;
  for (;;) {
    const size_t p = raw.find(kSep, start);
    if (p == std::string_view::npos) break;
    pieces.push_back(raw.substr(start, p - start));
    start = p + kSep.size();
  }
  // What follows the last separator is unfinished: dropped.
  std::string out;
  for (auto piece : pieces) {
    const auto t = trim(piece);
    if (t.empty()) continue;
    if (!out.empty()) out += '\n';
    out += t;
  }
  return out;
}

}  // namespace ss
