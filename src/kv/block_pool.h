#pragma once
// Where KV lives: a preallocated pool of fixed-size blocks. Each block holds
// `block_tokens` tokens of K and V for every layer:
//   data[block][layer] = K [kv_dim][block_tokens], then V [block_tokens][kv_dim]
// K is stored dimension-major so attention scores vectorise across the keys
// of a block (one contiguous load per head dimension); V stays token-major,
// which is what the probability-weighted sum over keys reads.
// Blocks are reference-counted so a read-only prefix (shared sinks) can be
// held by several sequences. Running out is a value (nullopt), never an abort.
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

namespace ss {

using BlockId = int32_t;

struct BlockPoolConfig {
  int n_blocks = 0;
  int block_tokens = 16;
  int n_layers = 0;
  int kv_dim = 0;
};

class BlockPool {
 public:
  explicit BlockPool(const BlockPoolConfig& cfg);
  BlockPool(const BlockPool&) = delete;  // would share the storage
  BlockPool& operator=(const BlockPool&) = delete;
  BlockPool(BlockPool&&) = default;
  BlockPool& operator=(BlockPool&&) = default;

  std::optional<BlockId> allocate();
  void retain(BlockId id);
  void release(BlockId id);

  int block_tokens() const { return cfg_.block_tokens; }
  int total_blocks() const { return cfg_.n_blocks; }
  int free_blocks() const { return static_cast<int>(free_.size()); }
  int used_blocks() const { return total_blocks() - free_blocks(); }
  int peak_used_blocks() const { return peak_used_; }  // high-water mark
  int refcount(BlockId id) const { return refs_[static_cast<size_t>(id)]; }
  size_t bytes() const { return floats_ * sizeof(float); }
  size_t block_bytes() const { return block_floats_ * sizeof(float); }

  // K of one block and layer, [kv_dim x block_tokens]: key `t`, dimension `d`
  // is k(id, layer)[d * block_tokens + t]. V: [block_tokens x kv_dim].
  float* k(BlockId id, int layer) { return base(id, layer); }
  float* v(BlockId id, int layer) { return base(id, layer) + layer_half_; }
  const float* k(BlockId id, int layer) const { return const_cast<BlockPool*>(this)->base(id, layer); }
  const float* v(BlockId id, int layer) const { return const_cast<BlockPool*>(this)->base(id, layer) + layer_half_; }

  // One token's K and V rows ([kv_dim] each) in and out of a block.
  void store(BlockId id, int layer, int offset, const float* k_row, const float* v_row);
  void load(BlockId id, int layer, int offset, float* k_row, float* v_row) const;

 private:
  float* base(BlockId id, int layer);

  BlockPoolConfig cfg_;
  size_t layer_half_;    // floats of K (or V) per layer per block
  size_t block_floats_;  // floats per block
  // In huge pages where the system allows (fewer TLB misses as attention
  // walks blocks); pages are zero and take memory on first use.
  std::shared_ptr<uint8_t> mem_;
  float* data_ = nullptr;
  size_t floats_ = 0;
  std::vector<int> refs_;
  std::vector<BlockId> free_;  // LIFO
  int peak_used_ = 0;
};

}  // namespace ss
