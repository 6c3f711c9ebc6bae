#include "sample/token_trie.h"

#include <algorithm>
#include <numeric>

namespace ss {

TokenTrie::TokenTrie(std::span<const std::string> token_bytes) : bytes_(token_bytes) {
  std::vector<int32_t> ids(token_bytes.size());
  std::iota(ids.begin(), ids.end(), 0);
  std::sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) {
    return token_bytes[static_cast<size_t>(a)] < token_bytes[static_cast<size_t>(b)];
  });
  // Breadth first over the sorted ids: a node owns a range of them that
  // shares its `depth` first bytes, and its children are made side by side.
  struct Todo {
    uint32_t node;
    size_t lo, hi, depth;
  };
  std::vector<Todo> todo{{0, 0, ids.size(), 0}};
  nodes_.emplace_back();
  auto bytes = [&](size_t i) -> const std::string& { return token_bytes[static_cast<size_t>(ids[i])]; };
  for (size_t t = 0; t < todo.size(); ++t) {
    const Todo cur = todo[t];
    max_depth_ = std::max(max_depth_, cur.depth);
    size_t i = cur.lo;
    nodes_[cur.node].token_begin = static_cast<uint32_t>(tokens_.size());
    for (; i < cur.hi && bytes(i).size() == cur.depth; ++i) tokens_.push_back(ids[i]);
    nodes_[cur.node].token_end = static_cast<uint32_t>(tokens_.size());
    nodes_[cur.node].edge_begin = static_cast<uint32_t>(edge_byte_.size());
    while (i < cur.hi) {
      const auto b = static_cast<uint8_t>(bytes(i)[cur.depth]);
      size_t j = i;
      while (j < cur.hi && static_cast<uint8_t>(bytes(j)[cur.depth]) == b) ++j;
      const auto child = static_cast<uint32_t>(nodes_.size());
      nodes_.emplace_back();
      edge_byte_.push_back(b);
      edge_child_.push_back(child);
      todo.push_back({child, i, j, cur.depth + 1});
      i = j;
    }
    nodes_[cur.node].edge_end = static_cast<uint32_t>(edge_byte_.size());
  }
}

}  // namespace ss
