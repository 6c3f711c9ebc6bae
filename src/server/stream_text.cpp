#include "server/stream_text.h"

#include <algorithm>

#include "util/utf8.h"

namespace ss {

namespace {
bool is_continuation(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }
}  // namespace

StreamText::StreamText(std::vector<std::string> stop) {
  for (auto& s : stop) {
    if (s.empty()) continue;
    hold_ = std::max(hold_, s.size() - 1);
    stop_.push_back(std::move(s));
  }
}

bool StreamText::push(std::string_view bytes) {
  if (stopped_) return true;
  const size_t old = text_.size();
  text_.append(bytes);
  size_t cut = std::string::npos;
  for (const auto& s : stop_) {
    // A new match ends in the new bytes, so it starts at most |s| - 1 before them.
    const size_t from = old >= s.size() ? old - (s.size() - 1) : 0;
    const size_t p = text_.find(s, from);
    if (p != std::string::npos) cut = std::min(cut, p);
  }
  if (cut == std::string::npos) return false;
  // A match never starts before taken_: bytes were taken only once no stop
  // string could begin among them.
  text_.resize(std::max(cut, taken_));
  stopped_ = true;
  return true;
}

std::string StreamText::take() {
  if (stopped_) return {};
  size_t ready = text_.size() > hold_ ? text_.size() - hold_ : 0;
  // End on a whole character: if the nearest lead byte among the last three
  // before `ready` starts a sequence that runs past it (cut by the hold-back,
  // or not all generated yet), stop before that lead byte. Invalid bytes are
  // never waited for: a sequence that cannot complete goes out as it is.
  for (size_t k = 1; k <= 3 && k <= ready - std::min(ready, taken_); ++k) {
    const char c = text_[ready - k];
    if (is_continuation(c)) continue;
    if (static_cast<size_t>(utf8_seq_len(static_cast<unsigned char>(c))) > k) ready -= k;
    break;
  }
  if (ready <= taken_) return {};
  std::string out = text_.substr(taken_, ready - taken_);
  taken_ = ready;
  return out;
}

std::string StreamText::finish() {
  std::string out = taken_ < text_.size() ? text_.substr(taken_) : std::string();
  taken_ = text_.size();
  return out;
}

}  // namespace ss
