#include "kv/block_pool.h"

#include <algorithm>
#include <cstring>

#include "ops/convert.h"
#include "util/check.h"
#include "util/mapped_file.h"

namespace ss {

namespace {
bool is_kv_type(GgmlType t) { return kv_k_dim_major(t) || t == GgmlType::Q8_0 || t == GgmlType::Q4_0; }
}  // namespace

Status kv_type_usable(GgmlType type, int kv_dim) {
  if (!is_kv_type(type)) return make_error("KV cache type " + kv_type_name(type) + " is not supported");
  if (!kv_k_dim_major(type) && kv_dim % 32 != 0)
    return make_error("KV cache type " + kv_type_name(type) +
                      " needs K/V rows in whole blocks of 32; this model's are " + std::to_string(kv_dim) + " wide");
  return ok_status();
}

Result<GgmlType> parse_kv_type(std::string_view name) {
  for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q8_0, GgmlType::Q4_0})
    if (name == kv_type_name(t)) return t;
  return make_error("unknown KV cache type '" + std::string(name) + "' (f32, f16, bf16, q8_0, q4_0)");
}

std::string kv_type_name(GgmlType type) {
  std::string n = type_name(static_cast<uint32_t>(type));
  std::transform(n.begin(), n.end(), n.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return n;
}

BlockPool::BlockPool(const BlockPoolConfig& cfg) : cfg_(cfg) {
  // Zero layers is a pool of bookkeeping only (a model whose layers all
  // slide keeps its KV in the sliding pool).
  SS_CHECK(cfg.n_blocks >= 0 && cfg.block_tokens > 0 && cfg.n_layers >= 0 && cfg.kv_dim > 0);
  SS_CHECK_MSG(kv_type_usable(cfg.type, cfg.kv_dim).ok(), "BlockPool: unusable KV type (check kv_type_usable first)");
  SS_CHECK_MSG(!cfg.v_dim_major || kv_k_dim_major(cfg.type), "BlockPool: dimension-major V needs a float type");
  row_bytes_ = ::ss::row_bytes(cfg.type, cfg.kv_dim);
  layer_half_ = static_cast<size_t>(cfg.block_tokens) * row_bytes_;
  block_bytes_ = layer_half_ * 2 * static_cast<size_t>(cfg.n_layers);
  bytes_ = block_bytes_ * static_cast<size_t>(cfg.n_blocks);
  if (bytes_ > 0) {
    mem_ = allocate_huge(bytes_);
    data_ = mem_.get();
    // A pool larger than half the free memory stays lazy: a server's
    // default pool (64 sequences' worth) of a large model may exceed the
    // machine and still serve the sessions it actually holds.
    if (cfg.prefault && bytes_ <= free_memory_bytes() / 2) touch_pages(data_, bytes_);
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

size_t BlockPool::elem_bytes() const { return cfg_.type == GgmlType::F32 ? 4 : 2; }

float* BlockPool::k(BlockId id, int layer) {
  SS_CHECK(cfg_.type == GgmlType::F32);
  return reinterpret_cast<float*>(base(id, layer));
}

float* BlockPool::v(BlockId id, int layer) {
  SS_CHECK(cfg_.type == GgmlType::F32);
  return reinterpret_cast<float*>(base(id, layer) + layer_half_);
}

void BlockPool::store(BlockId id, int layer, int offset, const float* k_row, const float* v_row) {
  store_part(id, layer, offset, 0, cfg_.kv_dim, k_row, v_row);
}

void BlockPool::store_part(BlockId id, int layer, int offset, int elem0, int n, const float* k_in, const float* v_in) {
  SS_CHECK(offset >= 0 && offset < cfg_.block_tokens && elem0 >= 0 && n >= 0 && elem0 + n <= cfg_.kv_dim);
  uint8_t* kb = base(id, layer);
  uint8_t* vb = kb + layer_half_ + static_cast<size_t>(offset) * row_bytes_;
  if (kv_k_dim_major(cfg_.type)) {
    const size_t es = elem_bytes();
    thread_local std::vector<uint8_t> elems;  // a row in the pool's type, then scattered to its column
    elems.resize(static_cast<size_t>(n) * es);
    convert_row(cfg_.type, k_in, elems.data(), n);
    put_column(kb, offset, elem0, n, elems.data());
    if (cfg_.v_dim_major) {
      convert_row(cfg_.type, v_in, elems.data(), n);
      put_column(kb + layer_half_, offset, elem0, n, elems.data());
    } else {
      convert_row(cfg_.type, v_in, vb + static_cast<size_t>(elem0) * es, n);
    }
  } else {
    SS_CHECK_MSG(elem0 % 32 == 0 && n % 32 == 0, "quantized KV rows are written in whole blocks");
    const size_t skip = ::ss::row_bytes(cfg_.type, elem0);
    quantize_row(cfg_.type, k_in, kb + static_cast<size_t>(offset) * row_bytes_ + skip, n);
    quantize_row(cfg_.type, v_in, vb + skip, n);
  }
}

namespace {
// Elements of ES bytes from a contiguous row to a column of stride `stride`
// elements (or back): a copy of constant size per element, which compiles
// to one move (a run-time size is a call to memcpy per element).
template <size_t ES>
void scatter(uint8_t* col, size_t stride, const uint8_t* row, int n) {
  for (int d = 0; d < n; ++d)
    std::memcpy(col + static_cast<size_t>(d) * stride * ES, row + static_cast<size_t>(d) * ES, ES);
}
template <size_t ES>
void gather(uint8_t* row, const uint8_t* col, size_t stride, int n) {
  for (int d = 0; d < n; ++d)
    std::memcpy(row + static_cast<size_t>(d) * ES, col + static_cast<size_t>(d) * stride * ES, ES);
}
}  // namespace

void BlockPool::put_column(uint8_t* half, int offset, int elem0, int n, const uint8_t* elems) const {
  const size_t es = elem_bytes(), bt = static_cast<size_t>(cfg_.block_tokens);
  uint8_t* col = half + (static_cast<size_t>(elem0) * bt + static_cast<size_t>(offset)) * es;
  if (es == 4)
    scatter<4>(col, bt, elems, n);
  else
    scatter<2>(col, bt, elems, n);
}

void BlockPool::get_column(const uint8_t* half, int offset, uint8_t* elems) const {
  const size_t es = elem_bytes(), bt = static_cast<size_t>(cfg_.block_tokens);
  const uint8_t* col = half + static_cast<size_t>(offset) * es;
  if (es == 4)
    gather<4>(elems, col, bt, cfg_.kv_dim);
  else
    gather<2>(elems, col, bt, cfg_.kv_dim);
}

void BlockPool::load(BlockId id, int layer, int offset, float* k_row, float* v_row) const {
  std::vector<uint8_t> raw(2 * row_bytes_);
  load_raw(id, layer, offset, raw.data(), raw.data() + row_bytes_);
  dequantize_row(cfg_.type, raw.data(), k_row, cfg_.kv_dim);
  dequantize_row(cfg_.type, raw.data() + row_bytes_, v_row, cfg_.kv_dim);
}

void BlockPool::load_raw(BlockId id, int layer, int offset, uint8_t* k_row, uint8_t* v_row) const {
  SS_CHECK(offset >= 0 && offset < cfg_.block_tokens);
  const uint8_t* kb = const_cast<BlockPool*>(this)->base(id, layer);
  if (kv_k_dim_major(cfg_.type))
    get_column(kb, offset, k_row);
  else
    std::memcpy(k_row, kb + static_cast<size_t>(offset) * row_bytes_, row_bytes_);
  if (cfg_.v_dim_major)
    get_column(kb + layer_half_, offset, v_row);
  else
    std::memcpy(v_row, kb + layer_half_ + static_cast<size_t>(offset) * row_bytes_, row_bytes_);
}

void BlockPool::store_raw(BlockId id, int layer, int offset, const uint8_t* k_row, const uint8_t* v_row) {
  SS_CHECK(offset >= 0 && offset < cfg_.block_tokens);
  uint8_t* kb = base(id, layer);
  if (kv_k_dim_major(cfg_.type))
    put_column(kb, offset, 0, cfg_.kv_dim, k_row);
  else
    std::memcpy(kb + static_cast<size_t>(offset) * row_bytes_, k_row, row_bytes_);
  if (cfg_.v_dim_major)
    put_column(kb + layer_half_, offset, 0, cfg_.kv_dim, v_row);
  else
    std::memcpy(kb + layer_half_ + static_cast<size_t>(offset) * row_bytes_, v_row, row_bytes_);
}

}  // namespace ss
