#pragma once
// Where KV lives: a preallocated pool of fixed-size blocks. Each block holds
// `block_tokens` tokens of K and V for every layer, in the pool's element
// type (F32, F16, BF16, or ggml's Q8_0 / Q4_0 blocks of 32):
//   data[layer][block] = K, then V, each block_tokens * row_bytes bytes
// (layer-major: one layer's blocks sit side by side, so attention walking a
// sequence's blocks in order reads forward through memory).
// Float types store K dimension-major ([kv_dim][block_tokens]) so attention
// scores vectorise across the keys of a block (one contiguous load per head
// dimension); quantized types store K token-major, one row of ggml blocks
// per token (a block's scale covers 32 consecutive elements of one token).
// V is token-major for every type ([block_tokens] rows), which is what the
// probability-weighted sum over keys reads for heads wide enough to fill a
// vector; float-type pools for heads of 8 or less keep V dimension-major
// like K instead (v_dim_major: ops/attention.h kv_v_dim_major_suits).
// Blocks are reference-counted so a read-only prefix (shared sinks) can be
// held by several sequences. Running out is a value (nullopt), never an abort.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "format/ggml_types.h"
#include "ops/attention.h"
#include "util/check.h"
#include "util/result.h"

namespace ss {

using BlockId = int32_t;

struct BlockPoolConfig {
  int n_blocks = 0;
  int block_tokens = 16;
  int n_layers = 0;
  int kv_dim = 0;
  GgmlType type = GgmlType::F32;
  // Fault every page in when the pool is made (if it takes at most half the
  // free memory), as llama.cpp and vLLM hold their caches: else the decode
  // step that first writes a block's huge page waits for the kernel to zero
  // 2 MiB, and maybe to compact memory for it (THP defrag "madvise").
  bool prefault = true;
  // V laid out as K is ([kv_dim][block_tokens]); float types only.
  bool v_dim_major = false;
};

// Can a cache of kv_dim-wide rows hold this type? (F32, F16, BF16; Q8_0 and
// Q4_0 when kv_dim is a multiple of their 32-element blocks.)
Status kv_type_usable(GgmlType type, int kv_dim);
// "f32", "f16", "bf16", "q8_0", "q4_0".
Result<GgmlType> parse_kv_type(std::string_view name);
std::string kv_type_name(GgmlType type);

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
  GgmlType type() const { return cfg_.type; }
  int kv_dim() const { return cfg_.kv_dim; }
  bool v_dim_major() const { return cfg_.v_dim_major; }
  size_t bytes() const { return bytes_; }
  size_t block_bytes() const { return block_bytes_; }
  // Bytes of one token's K (or V) row of one layer in the pool's type.
  size_t row_bytes() const { return row_bytes_; }

  // F32 pools: K of one block and layer, [kv_dim x block_tokens] (key `t`,
  // dimension `d` at k(id, layer)[d * block_tokens + t]); V [block_tokens x
  // kv_dim], or laid out as K if v_dim_major().
  float* k(BlockId id, int layer);
  float* v(BlockId id, int layer);
  const float* k(BlockId id, int layer) const { return const_cast<BlockPool*>(this)->k(id, layer); }
  const float* v(BlockId id, int layer) const { return const_cast<BlockPool*>(this)->v(id, layer); }
  // Any type: the attention kernels' view of one KV head (elements
  // [elem0, elem0 + head_dim) of each row) in a block.
  // Inline: the engine builds one per block per layer (hundreds a token at
  // long contexts), straight into its run list.
  KvHeadView head_view(BlockId id, int layer, int elem0) const {
    const uint8_t* b = const_cast<BlockPool*>(this)->base(id, layer);
    return KvHeadView{cfg_.type, b, b + layer_half_, cfg_.block_tokens, row_bytes_, elem0, cfg_.v_dim_major};
  }

  // One token's K and V rows ([kv_dim] floats each) in and out of a block,
  // converted to and from the pool's type.
  void store(BlockId id, int layer, int offset, const float* k_row, const float* v_row);
  void load(BlockId id, int layer, int offset, float* k_row, float* v_row) const;
  // Elements [elem0, elem0 + n) of a token's rows only (one KV head): for
  // quantized types both must be multiples of 32, so no block is shared
  // with another head.
  void store_part(BlockId id, int layer, int offset, int elem0, int n, const float* k, const float* v);
  // The same rows as raw bytes in the pool's type (row_bytes() each), K
  // token-major whatever the block layout: lossless persistence.
  void load_raw(BlockId id, int layer, int offset, uint8_t* k_row, uint8_t* v_row) const;
  void store_raw(BlockId id, int layer, int offset, const uint8_t* k_row, const uint8_t* v_row);

 private:
  uint8_t* base(BlockId id, int layer) {
    SS_CHECK(id >= 0 && id < cfg_.n_blocks && layer >= 0 && layer < cfg_.n_layers);
    return data_ + (static_cast<size_t>(layer) * static_cast<size_t>(cfg_.n_blocks) + static_cast<size_t>(id)) * 2 *
                       layer_half_;
  }
  size_t elem_bytes() const;  // float types
  // Dimension-major K (or V): elements [elem0, elem0 + n) of one token (n
  // elements of the pool's type, contiguous) into the token's column
  // `offset` of the half at `half`, and the whole column back out.
  void put_column(uint8_t* half, int offset, int elem0, int n, const uint8_t* elems) const;
  void get_column(const uint8_t* half, int offset, uint8_t* elems) const;

  BlockPoolConfig cfg_;
  size_t row_bytes_;    // one token's K (or V) row of one layer
  size_t layer_half_;   // bytes of K (or V) per layer per block
  size_t block_bytes_;  // bytes per block
  // In huge pages where the system allows (fewer TLB misses as attention
  // walks blocks); pages are zero and take memory on first use.
  std::shared_ptr<uint8_t> mem_;
  uint8_t* data_ = nullptr;
  size_t bytes_ = 0;
  std::vector<int> refs_;
  std::vector<BlockId> free_;  // LIFO
  int peak_used_ = 0;
};

}  // namespace ss
