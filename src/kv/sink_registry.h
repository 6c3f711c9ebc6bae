#pragma once
// Shared sink KV: sequences whose first S tokens are identical (same model,
// same policy) compute identical sink KV, so the first one to finish its
// sinks registers those blocks and later ones adopt them read-only. The key
// is the policy's name plus the sequence's own first S tokens — never a
// later turn's tokens. Entries hold one pool reference per block; an entry
// nobody else references is released by prune(), so once every sequence is
// gone the pool is back to its baseline. Model identity is the pool's: one
// registry serves one engine.
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "kv/block_pool.h"

namespace ss {

class SinkRegistry {
 public:
  // The registered blocks for (policy, first S tokens), or nullptr.
  const std::vector<BlockId>* find(const std::string& policy, std::span<const int32_t> first_tokens) const;
  // Registers a sequence's complete sink blocks (retains each); a key that is
  // already present keeps its first blocks. Returns whether it was added.
  bool add(BlockPool& pool, const std::string& policy, std::span<const int32_t> first_tokens,
           const std::vector<BlockId>& blocks);
  // Releases entries whose blocks only the registry still references;
  // returns the number of blocks given back.
  int prune(BlockPool& pool);
  // Releases every entry (the pool is being torn down or reset).
  void clear(BlockPool& pool);

  size_t entries() const { return entries_.size(); }
  // Blocks held by entries (each counted once).
  int blocks() const;

 private:
  using Key = std::pair<std::string, std::vector<int32_t>>;
  std::map<Key, std::vector<BlockId>> entries_;
};

}  // namespace ss
