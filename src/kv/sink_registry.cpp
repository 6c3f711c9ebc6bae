#include "kv/sink_registry.h"

namespace ss {

const std::vector<BlockId>* SinkRegistry::find(const std::string& policy, std::span<const int32_t> first_tokens) const {
  auto it = entries_.find(Key{policy, {first_tokens.begin(), first_tokens.end()}});
  return it == entries_.end() ? nullptr : &it->second;
}

bool SinkRegistry::add(BlockPool& pool, const std::string& policy, std::span<const int32_t> first_tokens,
                       const std::vector<BlockId>& blocks) {
  Key key{policy, {first_tokens.begin(), first_tokens.end()}};
  if (blocks.empty() || entries_.count(key)) return false;
  for (BlockId b : blocks) pool.retain(b);
  entries_.emplace(std::move(key), blocks);
  return true;
}

int SinkRegistry::prune(BlockPool& pool) {
  int released = 0;
  for (auto it = entries_.begin(); it != entries_.end();) {
    bool only_us = true;
    for (BlockId b : it->second) only_us = only_us && pool.refcount(b) == 1;
    if (only_us) {
      for (BlockId b : it->second) pool.release(b);
      released += static_cast<int>(it->second.size());
      it = entries_.erase(it);
    } else {
      ++it;
    }
  }
  return released;
}

void SinkRegistry::clear(BlockPool& pool) {
  for (auto& [key, blocks] : entries_)
    for (BlockId b : blocks) pool.release(b);
  entries_.clear();
}

int SinkRegistry::blocks() const {
  int n = 0;
  for (const auto& [key, blocks] : entries_) n += static_cast<int>(blocks.size());
  return n;
}

}  // namespace ss
