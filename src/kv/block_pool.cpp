#include "kv/block_pool.h"

#include <algorithm>

#include "util/check.h"
#include "util/mapped_file.h"

namespace ss {

BlockPool::BlockPool(const BlockPoolConfig& cfg) : cfg_(cfg) {
  // Zero layers is a pool of bookkeeping only (a model whose layers all
  // slide keeps its KV in the sliding pool).
  SS_CHECK(cfg.n_blocks >= 0 && cfg.block_tokens > 0 && cfg.n_layers >= 0 && cfg.kv_dim > 0);
  layer_half_ = static_cast<size_t>(cfg.block_tokens) * static_cast<size_t>(cfg.kv_dim);
  block_floats_ = layer_half_ * 2 * static_cast<size_t>(cfg.n_layers);
  floats_ = block_floats_ * static_cast<size_t>(cfg.n_blocks);
  if (floats_ > 0) {
    mem_ = allocate_huge(floats_ * sizeof(float));
    data_ = reinterpret_cast<float*>(mem_.get());
  }
  refs_.assign(static_cast<size_t>(cfg.n_blocks), 0);
  for (int i = cfg.n_blocks - 1; i >= 0; --i) free_.push_back(i);
}

std::optional<BlockId> BlockPool::allocate() {
  if (free_.empty()) return std::nullopt;
  const BlockId id = free_.back();
  free_.pop_back();
  refs_[static_cast<size_t>(id)] = 1;
  peak_used_ = std::max(peak_used_, used_blocks());
  return id;
}

void BlockPool::retain(BlockId id) {
  SS_CHECK(id >= 0 && id < cfg_.n_blocks && refs_[static_cast<size_t>(id)] > 0);
  ++refs_[static_cast<size_t>(id)];
}

void BlockPool::release(BlockId id) {
  SS_CHECK(id >= 0 && id < cfg_.n_blocks && refs_[static_cast<size_t>(id)] > 0);
  if (--refs_[static_cast<size_t>(id)] == 0) free_.push_back(id);
}

void BlockPool::store(BlockId id, int layer, int offset, const float* k_row, const float* v_row) {
  SS_CHECK(offset >= 0 && offset < cfg_.block_tokens);
  float* k_col = k(id, layer) + offset;
  for (int d = 0; d < cfg_.kv_dim; ++d) k_col[static_cast<size_t>(d) * cfg_.block_tokens] = k_row[d];
  std::copy(v_row, v_row + cfg_.kv_dim, v(id, layer) + static_cast<size_t>(offset) * cfg_.kv_dim);
}

void BlockPool::load(BlockId id, int layer, int offset, float* k_row, float* v_row) const {
  SS_CHECK(offset >= 0 && offset < cfg_.block_tokens);
  const float* k_col = k(id, layer) + offset;
  for (int d = 0; d < cfg_.kv_dim; ++d) k_row[d] = k_col[static_cast<size_t>(d) * cfg_.block_tokens];
  const float* v_src = v(id, layer) + static_cast<size_t>(offset) * cfg_.kv_dim;
  std::copy(v_src, v_src + cfg_.kv_dim, v_row);
}

float* BlockPool::base(BlockId id, int layer) {
  SS_CHECK(id >= 0 && id < cfg_.n_blocks && layer >= 0 && layer < cfg_.n_layers);
  return data_ + static_cast<size_t>(id) * block_floats_ + static_cast<size_t>(layer) * 2 * layer_half_;
}

}  // namespace ss
