#pragma once
// The vocabulary's token bytes as a prefix tree, so a grammar's mask steps
// each shared prefix once ("the", "then", "there" share three steps) and
// drops every token under a byte the grammar refuses in one go.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace ss {

class TokenTrie {
 public:
  struct Node {
    uint32_t edge_begin = 0, edge_end = 0;    // its children: edges [edge_begin, edge_end)
    uint32_t token_begin = 0, token_end = 0;  // tokens whose bytes end here
  };

  // token_bytes[id]: the bytes token `id` adds to the text (empty: none).
  // The trie reads them where they are: they must outlive it.
  explicit TokenTrie(std::span<const std::string> token_bytes);

  const Node& root() const { return nodes_[0]; }
  const Node& node(uint32_t i) const { return nodes_[i]; }
  uint8_t edge_byte(uint32_t e) const { return edge_byte_[e]; }
  uint32_t edge_child(uint32_t e) const { return edge_child_[e]; }
  std::span<const int32_t> tokens(const Node& n) const {
    return std::span<const int32_t>(tokens_).subspan(n.token_begin, n.token_end - n.token_begin);
  }
  size_t vocab_size() const { return bytes_.size(); }
  const std::string& bytes(size_t id) const { return bytes_[id]; }
  size_t node_count() const { return nodes_.size(); }
  size_t max_depth() const { return max_depth_; }

 private:
  std::vector<Node> nodes_;
  std::vector<uint8_t> edge_byte_;  // edges sorted by byte within a node
  std::vector<uint32_t> edge_child_;
  std::vector<int32_t> tokens_;
  std::span<const std::string> bytes_;  // by token id, not owned
  size_t max_depth_ = 0;
};

}  // namespace ss
