#include "model/vocab.h"

#include <cstdio>

namespace ss {

void Vocab::finalize() {
  index_.clear();
  index_.reserve(pieces.size());
  for (int32_t i = 0; i < size(); ++i) index_.emplace(pieces[i], i);  // first wins on duplicates
  for (auto& b : byte_ids_) b = -1;
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "<0x%02X>", b);
    byte_ids_[b] = find(buf);
  }
  if (types.size() != pieces.size()) types.assign(pieces.size(), TokenType::Normal);
  if (scores.size() != pieces.size()) scores.assign(pieces.size(), 0.0f);
}

}  // namespace ss
