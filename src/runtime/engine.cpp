#include "runtime/engine.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "ops/attention.h"
#include "runtime/kernel_layouts.h"
#include "util/check.h"

namespace ss {

void size_kv_pools(EngineOptions& eo, const ModelConfig& c, const KvPolicy& p, int64_t tokens, int sequences) {
  eo.kv_blocks = sequences * blocks_per_sequence(p, tokens, eo.block_tokens, eo.max_chunk);
  const int w = c.sliding_window();
  eo.sliding_kv_blocks =
      w > 0 ? sequences * blocks_per_sequence(KvPolicy::sliding_layer(w), tokens, eo.block_tokens, eo.max_chunk) : 0;
}

std::vector<int64_t> sliding_resident(int w, int64_t n_seen) {
  return w > 0 ? KvPolicy::sliding_layer(w).resident(n_seen) : std::vector<int64_t>{};
}

namespace {

RopeScaling rope_scaling(const RotaryConfig& r) {
  RopeScaling s;
  s.freq_scale = r.freq_scale;
  s.ext_factor = r.yarn_ext_factor;
  s.attn_factor = r.yarn_attn_factor;
  s.beta_fast = r.yarn_beta_fast;
  s.beta_slow = r.yarn_beta_slow;
  s.orig_ctx = r.yarn_orig_ctx;
  return s;
}

// A pool of n_blocks for n_layers of this model's KV rows, laid out as its
// heads are read fastest.
BlockPoolConfig kv_pool_config(const ModelConfig& c, const EngineOptions& opts, int n_blocks, int n_layers) {
  BlockPoolConfig p{n_blocks, opts.block_tokens, n_layers, c.kv_dim(), opts.kv_type};
  p.v_dim_major = kv_v_dim_major_suits(opts.kv_type, c.head_dim);
  return p;
}
}  // namespace

Engine::Engine(std::shared_ptr<const Model> model, const EngineOptions& opts)
    : model_(with_kernel_layouts(std::move(model), opts.act_quant)),
      opts_(opts),
      pool_(kv_pool_config(model_->config, opts, opts.kv_blocks, model_->config.full_layers())),
      threads_(opts.threads) {
  SS_CHECK(opts.max_chunk > 0);
  const auto& c = config();
  int slots[2] = {0, 0};
  for (int l = 0; l < c.n_layers; ++l) {
    const KvGroup g = c.sliding(l) ? kSliding : kFull;
    layer_group_.push_back(g);
    layer_slot_.push_back(slots[g]++);
  }
  if (slots[kSliding] > 0)
    swa_pool_ = std::make_unique<BlockPool>(
        kv_pool_config(c, opts, opts.sliding_kv_blocks > 0 ? opts.sliding_kv_blocks : opts.kv_blocks, slots[kSliding]));
  if (c.positions == PositionKind::Rope) {
    rope_style_ = c.rotaries[0].neox ? RopeStyle::Neox : RopeStyle::Interleaved;
    for (const auto& r : c.rotaries) {
      SS_CHECK_MSG(r.neox == c.rotaries[0].neox, "rotaries of one model share their pair layout");
      ropes_.emplace_back(r.dim, r.base, rope_scaling(r));
    }
  } else {
    alibi_slopes_.resize(static_cast<size_t>(c.n_heads));
    alibi_slopes(c.n_heads, c.alibi_max_bias, alibi_slopes_.data());
  }
}

size_t Engine::peak_kv_bytes() const {
  size_t b = static_cast<size_t>(pool_.peak_used_blocks()) * pool_.block_bytes();
  if (swa_pool_) b += static_cast<size_t>(swa_pool_->peak_used_blocks()) * swa_pool_->block_bytes();
  return b;
}

size_t Engine::used_kv_bytes() const {
  size_t b = static_cast<size_t>(pool_.used_blocks()) * pool_.block_bytes();
  if (swa_pool_) b += static_cast<size_t>(swa_pool_->used_blocks()) * swa_pool_->block_bytes();
  return b;
}

Status Engine::check_policy(const KvPolicy& policy) const {
  if (!policy.h2o()) return ok_status();
  const auto& c = config();
  // Each KV head places its own tokens: a quantized block must not span heads.
  if (!kv_k_dim_major(pool_.type()) && c.head_dim % 32 != 0)
    return make_error("h2o with KV type " + kv_type_name(pool_.type()) +
                      " needs heads a multiple of 32 wide (this model's are " + std::to_string(c.head_dim) +
                      "); use a float KV type");
  if (observer_) return make_error("the attention inspector does not follow h2o's per-head caches");
  return ok_status();
}

Result<SeqId> Engine::create_sequence(const KvPolicy& policy) {
  const auto& c = config();
  SS_TRY(check_policy(policy));
  const SeqId id = next_id_++;
  EngineSequence& s = seqs_[id];
  s.kv[kFull] = std::make_unique<SequenceKv>(pool_, policy, opts_.max_chunk, c.full_layers() * c.n_kv_heads);
  if (swa_pool_)
    s.kv[kSliding] =
        std::make_unique<SequenceKv>(*swa_pool_, KvPolicy::sliding_layer(config().sliding_window()), opts_.max_chunk);
  return id;
}

void Engine::free_sequence(SeqId id) { seqs_.erase(id); }

const SequenceKv* Engine::sequence(SeqId id) const {
  auto it = seqs_.find(id);
  return it == seqs_.end() ? nullptr : it->second.kv[kFull].get();
}

SequenceKv* Engine::mutable_sequence(SeqId id) {
  auto it = seqs_.find(id);
  return it == seqs_.end() ? nullptr : it->second.kv[kFull].get();
}

namespace {
// K then V of each of the pool's layers for every index, appended to rows
// as raw bytes of the pool's type.
void export_rows(const BlockPool& pool, const SequenceKv& kv, const std::vector<int64_t>& indices, int layers,
                 std::vector<uint8_t>& rows) {
  const size_t rb = pool.row_bytes();
  for (int64_t u : indices) {
    const KvSlot s = kv.slot(u);
    for (int l = 0; l < layers; ++l) {
      const size_t at = rows.size();
      rows.resize(at + 2 * rb);
      pool.load_raw(s.block, l, s.offset, rows.data() + at, rows.data() + at + rb);
    }
  }
}

void import_rows(BlockPool& pool, const SequenceKv& kv, const std::vector<int64_t>& indices, int layers,
                 const uint8_t* src) {
  const size_t rb = pool.row_bytes();
  for (int64_t u : indices) {
    const KvSlot s = kv.slot(u);
    for (int l = 0; l < layers; ++l) {
      pool.store_raw(s.block, l, s.offset, src, src + rb);
      src += 2 * rb;
    }
  }
}
}  // namespace

SequenceState Engine::export_sequence(SeqId id) const {
  const EngineSequence& seq = seqs_.at(id);
  SS_CHECK_MSG(!seq.kv[kFull]->policy().h2o(), "h2o sequences cannot be exported (per-head caches)");
  SequenceState st;
  st.policy = seq.kv[kFull]->policy();
  st.n_seen = seq.kv[kFull]->n_seen();
  st.kv_type = pool_.type();
  st.indices = seq.kv[kFull]->resident();
  export_rows(pool_, *seq.kv[kFull], st.indices, config().full_layers(), st.rows);
  if (swa_pool_)
    export_rows(*swa_pool_, *seq.kv[kSliding], sliding_resident(config().sliding_window(), st.n_seen),
                swa_pool_layers(), st.sliding_rows);
  return st;
}

std::vector<uint8_t> convert_kv_rows(const std::vector<uint8_t>& rows, GgmlType from, GgmlType to, int kv_dim) {
  if (from == to) return rows;
  const size_t in_b = row_bytes(from, kv_dim), out_b = row_bytes(to, kv_dim);
  std::vector<uint8_t> out(rows.size() / in_b * out_b);
  std::vector<float> f(static_cast<size_t>(kv_dim));
  for (size_t r = 0; r < rows.size() / in_b; ++r) {
    dequantize_row(from, rows.data() + r * in_b, f.data(), kv_dim);
    quantize_row(to, f.data(), out.data() + r * out_b, kv_dim);
  }
  return out;
}

Result<SeqId> Engine::import_sequence(const SequenceState& in) {
  const auto& c = config();
  if (!kv_type_usable(in.kv_type, c.kv_dim()).ok()) return make_error("sequence state: bad KV type");
  const SequenceState* use = &in;
  SequenceState converted;
  if (in.kv_type != pool_.type()) {
    const size_t in_rb = row_bytes(in.kv_type, c.kv_dim());
    if (in.rows.size() % in_rb != 0 || in.sliding_rows.size() % in_rb != 0)
      return make_error("sequence state: row data does not match the model");
    converted = in;
    converted.kv_type = pool_.type();
    converted.rows = convert_kv_rows(in.rows, in.kv_type, pool_.type(), c.kv_dim());
    converted.sliding_rows = convert_kv_rows(in.sliding_rows, in.kv_type, pool_.type(), c.kv_dim());
    use = &converted;
  }
  const SequenceState& st = *use;
  const size_t per = 2 * pool_.row_bytes();
  const auto swa_indices = sliding_resident(c.sliding_window(), st.n_seen);
  if (st.rows.size() != st.indices.size() * per * static_cast<size_t>(c.full_layers()) ||
      st.sliding_rows.size() != swa_indices.size() * per * static_cast<size_t>(swa_pool_layers()))
    return make_error("sequence state: row data does not match the model");
  if (st.policy.h2o()) return make_error("sequence state: h2o sequences cannot be imported");
  SS_ASSIGN_OR_RETURN(const SeqId id, create_sequence(st.policy));
  EngineSequence& seq = seqs_.at(id);
  Status r = seq.kv[kFull]->restore(st.n_seen, st.indices);
  if (r.ok() && swa_pool_) r = seq.kv[kSliding]->restore(st.n_seen, swa_indices);
  if (!r.ok()) {
    free_sequence(id);
    return r.error();
  }
  import_rows(pool_, *seq.kv[kFull], st.indices, c.full_layers(), st.rows.data());
  if (swa_pool_) import_rows(*swa_pool_, *seq.kv[kSliding], swa_indices, swa_pool_layers(), st.sliding_rows.data());
  return id;
}

Status Engine::adopt_sinks(SeqId id, const std::vector<BlockId>& blocks) {
  auto* seq = mutable_sequence(id);
  if (!seq) return make_error("unknown sequence");
  if (seq->n_seen() != 0) return make_error("adopt_sinks: sequence is not empty");
  if (seq->policy().h2o()) return make_error("adopt_sinks: h2o keeps its sinks in its own slots");
  // The sliding layers would need the sinks' KV in their own window too.
  if (swa_pool_) return make_error("adopt_sinks: models with sliding-window layers compute their sinks");
  return seq->adopt_sinks(blocks);
}

Status Engine::forward(std::span<const BatchItem> items, std::vector<std::vector<float>>& logits) {
  const int n_vocab = config().n_vocab;
  for (const auto& it : items) {
    if (!seqs_.count(it.seq)) return make_error("unknown sequence " + std::to_string(it.seq));
    if (it.tokens.empty()) return make_error("empty token list for sequence " + std::to_string(it.seq));
    for (int32_t t : it.tokens)
      if (t < 0 || t >= n_vocab)
        return make_error("token id " + std::to_string(t) + " out of range [0, " + std::to_string(n_vocab) + ")");
  }
  for (size_t i = 0; i < items.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (items[i].seq == items[j].seq)
        return make_error("sequence " + std::to_string(items[i].seq) + " appears twice in one batch");
  logits.assign(items.size(), {});
  for (size_t i = 0; i < items.size(); ++i)
    logits[i].assign(static_cast<size_t>(items[i].all_logits ? items[i].tokens.size() : 1) * n_vocab, 0.0f);

  // Rounds: each takes up to max_chunk tokens of every unfinished item.
  std::vector<size_t> done(items.size(), 0);
  std::vector<RoundPart> parts;
  for (;;) {
    parts.clear();
    for (size_t i = 0; i < items.size(); ++i) {
      const size_t n = items[i].tokens.size();
      if (done[i] >= n) continue;
      const int count = static_cast<int>(std::min<size_t>(n - done[i], static_cast<size_t>(opts_.max_chunk)));
      const bool last = done[i] + count == n;
      float* out = nullptr;
      if (items[i].all_logits)
        out = logits[i].data() + done[i] * n_vocab;
      else if (last)
        out = logits[i].data();
      parts.push_back({items[i].seq, seqs_.at(items[i].seq).kv[kFull].get(), items[i].tokens.data() + done[i], count,
                       out, items[i].all_logits, last});
      done[i] += count;
    }
    if (parts.empty()) break;
    for (auto& p : parts) {
      SS_TRY(p.seq->reserve(p.count));
      if (swa_pool_) SS_TRY(seqs_.at(p.id).kv[kSliding]->reserve(p.count));
    }
    run_round(parts);
  }
  return ok_status();
}

}  // namespace ss
