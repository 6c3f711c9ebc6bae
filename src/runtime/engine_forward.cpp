// The forward pass of one round as per-layer blocks: embedding, attention
// block, FFN block (dense or mixture of experts), output head. Every block
// reads the architecture's choices from the config; none looks at its name.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kv/positions.h"
#include "ops/activations.h"
#include "ops/matmul.h"
#include "ops/norm.h"
#include "runtime/engine.h"
#include "util/check.h"

namespace ss {

namespace {
// Multiply-adds (scores and values) per attention part below which a split
// costs more than it saves: measured on stories15M (6 heads of 48), where
// 1 << 16 beat 1 << 18 by 13% at 2 threads.
constexpr int64_t kMinAttnWorkPerPart = int64_t{1} << 16;

size_t at(int t, int width) { return static_cast<size_t>(t) * static_cast<size_t>(width); }

void add_bias(float* rows, int T, int width, const TensorView& bias) {
  if (bias.empty()) return;
  const float* b = bias.f32();
  for (int t = 0; t < T; ++t)
    for (int d = 0; d < width; ++d) rows[at(t, width) + d] += b[d];
}
}  // namespace

template <typename Fn>
void Engine::per_token(int T, Fn&& fn) {
  if (T < 8 || threads_.size() == 1) {
    for (int t = 0; t < T; ++t) fn(t);
    return;
  }
  threads_.parallel_for(static_cast<size_t>(T), [&](size_t b, size_t e) {
    for (size_t t = b; t < e; ++t) fn(static_cast<int>(t));
  });
}

void Engine::norm_rows(const TensorView& w, const TensorView& bias, const float* in, int rows, float* out) {
  const auto& c = config();
  const int dim = c.dim;
  per_token(rows, [&](int t) {
    if (c.norm == NormKind::Rms)
      rms_norm(in + at(t, dim), w.f32(), dim, c.norm_eps, out + at(t, dim));
    else
      layer_norm(in + at(t, dim), w.f32(), bias.empty() ? nullptr : bias.f32(), dim, c.norm_eps, out + at(t, dim));
  });
}

void Engine::prepare_round(std::span<RoundPart> parts, RoundBatch& b) {
  int T = 0;
  for (const auto& p : parts) T += p.count;
  b.T = T;
  b.seq.resize(static_cast<size_t>(T));
  b.seq_id.resize(static_cast<size_t>(T));
  b.pos.resize(static_cast<size_t>(T));
  b.sink_query.resize(static_cast<size_t>(T));
  b.h2o.assign(static_cast<size_t>(T), 0);
  b.h2o_parts.clear();
  b.angles.resize(ropes_.size());
  for (size_t r = 0; r < ropes_.size(); ++r) {
    const size_t n = at(T, ropes_[r].pairs());
    for (auto* v : {&b.angles[r].cos_t, &b.angles[r].sin_t, &b.angles[r].cos_c, &b.angles[r].sin_c}) v->resize(n);
  }
  int i = 0;
  for (const auto& p : parts) {
    EngineSequence* es = &seqs_.at(p.id);
    if (p.seq->policy().h2o()) {
      b.h2o_parts.emplace_back(i, p.count);
      std::fill(b.h2o.begin() + i, b.h2o.begin() + i + p.count, 1);
    }
    for (int j = 0; j < p.count; ++j, ++i) {
      const int64_t t = p.seq->n_seen() + j;
      b.seq[i] = es;
      b.seq_id[i] = p.id;
      b.pos[i] = t;
      const KvPolicy& pol = p.seq->policy();
      // A second, cache-position query exists only under RoPE: ALiBi's
      // queries carry no position (its biases follow the cache positions).
      b.sink_query[i] = !ropes_.empty() && pol.sinks > 0 && position_offset(pol, t) > 0;
      for (size_t r = 0; r < ropes_.size(); ++r) {
        const int pairs = ropes_[r].pairs();
        auto& a = b.angles[r];
        ropes_[r].angles(t, a.cos_t.data() + at(i, pairs), a.sin_t.data() + at(i, pairs));
        if (b.sink_query[i])
          ropes_[r].angles(query_cache_position(pol, t), a.cos_c.data() + at(i, pairs), a.sin_c.data() + at(i, pairs));
      }
    }
  }
  // Attention work is the same in every layer of a group: split it (or not)
  // once per round and group. Sliding layers attend over their own short
  // window (16 keys in gpt-oss-tiny), so the full layers' split handed them
  // parts too small to pay for the fork-join: gpt-oss-tiny at 2 threads had
  // decoded 6% slower than at 1, and 3.5% with only this changed.
  for (int g : {kFull, kSliding}) {
    int64_t work = 0;
    for (int t = 0; t < T; ++t) {
      const SequenceKv* kv = b.seq[t]->kv[g].get();
      if (kv) work += std::min<int64_t>(kv->cached_entries() + t + 1, b.pos[t] + 1);
    }
    work *= static_cast<int64_t>(config().q_dim()) * 2;
    b.attn_parts[g] =
        observer_ ? 1 : static_cast<int>(std::clamp<int64_t>(work / kMinAttnWorkPerPart, 1, threads_.size()));
    // The query tiles too: they follow the batch and where its keys sit,
    // which no layer changes.
    if (T > 0 && b.seq[0]->kv[g])
      query_tiles(b, static_cast<KvGroup>(g), b.tiles[g]);
    else
      b.tiles[g].clear();
    // As is whether its KV outgrows the CPU's caches (every block in use:
    // an upper bound on what the layer's attention reads).
    const BlockPool* pool = g == kFull ? &pool_ : swa_pool_.get();
    b.stream_kv[g] = pool && static_cast<size_t>(pool->used_blocks()) * pool->block_bytes() > opts_.stream_kv_bytes;
  }
}

void Engine::embed(std::span<RoundPart> parts, const RoundBatch& b) {
  const auto& c = config();
  int i = 0;
  for (const auto& p : parts)
    for (int j = 0; j < p.count; ++j, ++i) {
      float* x = x_.data() + at(i, c.dim);
      embedding_row(model_->tok_embd, p.tokens[j], x);
      if (c.embedding_scale != 1.0f)
        for (int d = 0; d < c.dim; ++d) x[d] *= c.embedding_scale;
    }
  SS_CHECK(i == b.T);
}

// in: [T x dim] normed input; out: [T x dim] the attention's output projection.
void Engine::attention_block(int l, const RoundBatch& b, const float* in, float* out) {
  const auto& c = config();
  const LayerWeights& L = model_->layers[static_cast<size_t>(l)];
  const int T = b.T, qd = c.q_dim(), kvd = c.kv_dim();
  const MatmulOut qkv[] = {{&L.wq, q_.data()}, {&L.wk, k_.data()}, {&L.wv, v_.data()}};
  matmul_shared_input(qkv, in, T, threads_, opts_.act_quant);
  add_bias(q_.data(), T, qd, L.bq);
  add_bias(k_.data(), T, kvd, L.bk);
  add_bias(v_.data(), T, kvd, L.bv);
  qkv_positions(l, b);
  if (observer_)
    attention_observed(l, b);
  else
    attention(l, b);
  matmul(L.wo, att_.data(), T, out, threads_, opts_.act_quant);
  add_bias(out, T, c.dim, L.bo);
  if (c.post_norms) norm_rows(L.post_attn_norm, {}, out, T, out);
}

// Clamp, q/k norms, rotary; K and V into the layer's pool.
void Engine::qkv_positions(int l, const RoundBatch& b) {
  const auto& c = config();
  const LayerWeights& L = model_->layers[static_cast<size_t>(l)];
  const int qd = c.q_dim(), kvd = c.kv_dim(), hd = c.head_dim;
  const KvGroup g = layer_group_[static_cast<size_t>(l)];
  BlockPool& pool = g == kFull ? pool_ : *swa_pool_;
  const int slot = layer_slot_[static_cast<size_t>(l)];
  const bool rope = c.positions == PositionKind::Rope;
  const int r = c.layer_attention[static_cast<size_t>(l)].rotary;
  const int pairs = rope ? ropes_[static_cast<size_t>(r)].pairs() : 0;
  if (g == kFull && !b.h2o_parts.empty()) place_h2o_tokens(l, b);
  per_token(b.T, [&](int t) {
    float* qt = q_.data() + at(t, qd);
    float* kt = k_.data() + at(t, kvd);
    float* vt = v_.data() + at(t, kvd);
    if (c.clamp_kqv > 0) {
      for (float* p : {qt, kt, vt}) {
        const int n = p == qt ? qd : kvd;
        for (int d = 0; d < n; ++d) p[d] = std::clamp(p[d], -c.clamp_kqv, c.clamp_kqv);
      }
    }
    if (c.qk_norm) {
      for (int h = 0; h < c.n_heads; ++h) rms_norm(qt + h * hd, L.q_norm.f32(), hd, c.norm_eps, qt + h * hd);
      for (int h = 0; h < c.n_kv_heads; ++h) rms_norm(kt + h * hd, L.k_norm.f32(), hd, c.norm_eps, kt + h * hd);
    }
    const bool h2o = g == kFull && b.h2o[t];
    if (rope) {
      // H2O rotates its heavy hitters' query per key, from the raw one.
      if (h2o) std::memcpy(qraw_.data() + at(t, qd), qt, sizeof(float) * qd);
      const auto& a = b.angles[static_cast<size_t>(r)];
      const float* ct = a.cos_t.data() + at(t, pairs);
      const float* st = a.sin_t.data() + at(t, pairs);
      rope_apply(kt, c.n_kv_heads, hd, pairs, ct, st, rope_style_);
      // Only full layers attend to sinks, with the query at its cache position.
      if (g == kFull && b.sink_query[t]) {
        float* qst = qs_.data() + at(t, qd);
        std::memcpy(qst, qt, sizeof(float) * qd);
        rope_apply(qst, c.n_heads, hd, pairs, a.cos_c.data() + at(t, pairs), a.sin_c.data() + at(t, pairs),
                   rope_style_);
      }
      rope_apply(qt, c.n_heads, hd, pairs, ct, st, rope_style_);
    }
    if (h2o) {
      for (int h = 0; h < c.n_kv_heads; ++h) {
        const KvSlot s = b.seq[t]->kv[g]->slot_at(h2o_slot_[at(t, c.n_kv_heads) + static_cast<size_t>(h)]);
        pool.store_part(s.block, slot, s.offset, h * hd, hd, kt + h * hd, vt + h * hd);
      }
      return;
    }
    const KvSlot s = b.seq[t]->kv[g]->slot(b.pos[t]);
    pool.store(s.block, slot, s.offset, kt, vt);
  });
}

void Engine::place_h2o_tokens(int l, const RoundBatch& b) {
  const int nkv = config().n_kv_heads, slot = layer_slot_[static_cast<size_t>(l)];
  for (const auto& [t0, count] : b.h2o_parts) {
    SequenceKv& seq = *b.seq[t0]->kv[kFull];
    for (int t = t0; t < t0 + count; ++t)
      for (int h = 0; h < nkv; ++h) {
        const int32_t s = seq.lane(slot * nkv + h).append(b.pos[t]);
        SS_CHECK_MSG(s >= 0, "h2o lane out of slots (reserve sizes them)");
        h2o_slot_[at(t, nkv) + static_cast<size_t>(h)] = s;
      }
  }
}

// in: [T x dim] normed input; out: [T x dim].
void Engine::ffn_block(int l, const RoundBatch& b, const float* in, float* out) {
  const auto& c = config();
  if (c.ffn == FfnKind::MoeSwigluOai) return moe_block(l, b, in, out);
  const LayerWeights& L = model_->layers[static_cast<size_t>(l)];
  const int T = b.T, hid = c.hidden_dim;
  if (c.ffn == FfnKind::GeluMlp) {
    matmul(L.w_up, in, T, hb_.data(), threads_, opts_.act_quant);
    add_bias(hb_.data(), T, hid, L.b_up);
    per_token(T, [&](int t) { gelu_tanh(hb_.data() + at(t, hid), hid); });
  } else {
    const MatmulOut gate_up[] = {{&L.w_gate, hb_.data()}, {&L.w_up, hb2_.data()}};
    matmul_shared_input(gate_up, in, T, threads_, opts_.act_quant);
    add_bias(hb_.data(), T, hid, L.b_gate);
    add_bias(hb2_.data(), T, hid, L.b_up);
    per_token(T, [&](int t) {
      float* h = hb_.data() + at(t, hid);
      if (c.ffn == FfnKind::GeGlu)
        geglu(h, hb2_.data() + at(t, hid), hid, h);
      else
        swiglu(h, hb2_.data() + at(t, hid), hid, h);
    });
  }
  matmul(L.w_down, hb_.data(), T, out, threads_, opts_.act_quant);
  add_bias(out, T, c.dim, L.b_down);
  if (c.post_norms) norm_rows(L.post_ffn_norm, {}, out, T, out);
}

// Router logits, top-k experts per token, softmax over those k; then each
// expert runs once over the rows routed to it.
void Engine::moe_block(int l, const RoundBatch& b, const float* in, float* out) {
  const auto& c = config();
  const LayerWeights& L = model_->layers[static_cast<size_t>(l)];
  const int T = b.T, dim = c.dim, hid = c.hidden_dim, E = c.n_experts, K = c.n_experts_used;
  router_.resize(at(T, E));
  matmul(L.router, in, T, router_.data(), threads_, opts_.act_quant);
  add_bias(router_.data(), T, E, L.router_b);
  // Reused across layers and rounds: no allocation per step once warm.
  auto& routed = moe_routed_;  // [E] of (token, weight)
  routed.resize(static_cast<size_t>(E));
  for (auto& r : routed) r.clear();
  auto& order = moe_order_;
  order.resize(static_cast<size_t>(E));
  for (int t = 0; t < T; ++t) {
    const float* r = router_.data() + at(t, E);
    for (int e = 0; e < E; ++e) order[static_cast<size_t>(e)] = e;
    // Ties go to the lower expert id, as a stable descending sort gives.
    std::partial_sort(order.begin(), order.begin() + K, order.end(),
                      [&](int a, int bb) { return r[a] > r[bb] || (r[a] == r[bb] && a < bb); });
    const float mx = r[order[0]];
    float sum = 0;
    for (int k = 0; k < K; ++k) sum += std::exp(r[order[static_cast<size_t>(k)]] - mx);
    for (int k = 0; k < K; ++k) {
      const int e = order[static_cast<size_t>(k)];
      routed[static_cast<size_t>(e)].push_back({t, std::exp(r[e] - mx) / sum});
    }
  }
  std::fill(out, out + at(T, dim), 0.0f);
  for (int e = 0; e < E; ++e) {
    const auto& rows = routed[static_cast<size_t>(e)];
    if (rows.empty()) continue;
    const auto ue = static_cast<size_t>(e);
    const int n = static_cast<int>(rows.size());
    moe_in_.resize(at(n, dim));
    moe_g_.resize(at(n, hid));
    moe_u_.resize(at(n, hid));
    moe_y_.resize(at(n, dim));
    for (int i = 0; i < n; ++i)
      std::memcpy(moe_in_.data() + at(i, dim), in + at(rows[i].first, dim), sizeof(float) * dim);
    const MatmulOut gate_up[] = {{&L.exp_gate[ue], moe_g_.data()}, {&L.exp_up[ue], moe_u_.data()}};
    matmul_shared_input(gate_up, moe_in_.data(), n, threads_, opts_.act_quant);
    if (!L.exp_gate_b.empty()) add_bias(moe_g_.data(), n, hid, L.exp_gate_b[ue]);
    if (!L.exp_up_b.empty()) add_bias(moe_u_.data(), n, hid, L.exp_up_b[ue]);
    for (int i = 0; i < n; ++i)
      swiglu_oai(moe_g_.data() + at(i, hid), moe_u_.data() + at(i, hid), hid, c.oai_swiglu_alpha, c.oai_swiglu_limit,
                 moe_g_.data() + at(i, hid));
    matmul(L.exp_down[ue], moe_g_.data(), n, moe_y_.data(), threads_, opts_.act_quant);
    if (!L.exp_down_b.empty()) add_bias(moe_y_.data(), n, dim, L.exp_down_b[ue]);
    for (int i = 0; i < n; ++i) {
      float* o = out + at(rows[i].first, dim);
      const float* y = moe_y_.data() + at(i, dim);
      const float w = rows[i].second;
      for (int d = 0; d < dim; ++d) o[d] += w * y[d];
    }
  }
}

void Engine::output_block(std::span<RoundPart> parts, const RoundBatch& b) {
  const auto& c = config();
  const Model& m = *model_;
  logit_rows_.clear();
  logit_outs_.clear();
  int i = 0;
  for (const auto& p : parts) {
    for (int j = 0; j < p.count; ++j, ++i) {
      if (p.all_logits) {
        logit_rows_.push_back(i);
        logit_outs_.push_back(p.logits + static_cast<size_t>(j) * c.n_vocab);
      } else if (p.last_of_item && j == p.count - 1) {
        logit_rows_.push_back(i);
        logit_outs_.push_back(p.logits);
      }
    }
  }
  SS_CHECK(i == b.T);
  if (logit_rows_.empty()) return;
  // Logits only for the rows that need them, as one batched matmul.
  const int R = static_cast<int>(logit_rows_.size());
  normed_.resize(at(R, c.dim));
  logits_buf_.resize(at(R, c.n_vocab));
  for (int r = 0; r < R; ++r)
    std::memcpy(normed_.data() + at(r, c.dim), x_.data() + at(logit_rows_[r], c.dim), sizeof(float) * c.dim);
  norm_rows(m.output_norm, m.output_norm_b, normed_.data(), R, normed_.data());
  matmul(m.output, normed_.data(), R, logits_buf_.data(), threads_, opts_.act_quant);
  add_bias(logits_buf_.data(), R, c.n_vocab, m.output_b);
  if (const float cap = c.final_softcap; cap > 0)
    for (float& v : logits_buf_) v = cap * std::tanh(v / cap);
  for (int r = 0; r < R; ++r)
    std::memcpy(logit_outs_[r], logits_buf_.data() + at(r, c.n_vocab), sizeof(float) * c.n_vocab);
}

void Engine::run_round(std::span<RoundPart> parts) {
  const auto& c = config();
  RoundBatch& b = batch_;
  prepare_round(parts, b);
  const int T = b.T, dim = c.dim;
  for (auto* v : {&x_, &xb_, &xb2_, &attn_out_, &ffn_out_}) v->resize(at(T, dim));
  for (auto* v : {&q_, &qs_, &att_, &qraw_}) v->resize(at(T, c.q_dim()));
  h2o_slot_.resize(at(T, c.n_kv_heads));
  for (auto* v : {&k_, &v_}) v->resize(at(T, c.kv_dim()));
  for (auto* v : {&hb_, &hb2_}) v->resize(at(T, c.hidden_dim));
  embed(parts, b);

  for (int l = 0; l < c.n_layers; ++l) {
    const LayerWeights& L = model_->layers[static_cast<size_t>(l)];
    norm_rows(L.attn_norm, L.attn_norm_b, x_.data(), T, xb_.data());
    attention_block(l, b, xb_.data(), attn_out_.data());
    switch (c.residual) {
      case ResidualKind::Sequential:
        per_token(T, [&](int t) {
          for (int d = 0; d < dim; ++d) x_[at(t, dim) + d] += attn_out_[at(t, dim) + d];
        });
        norm_rows(L.ffn_norm, L.ffn_norm_b, x_.data(), T, xb_.data());
        ffn_block(l, b, xb_.data(), ffn_out_.data());
        per_token(T, [&](int t) {
          for (int d = 0; d < dim; ++d) x_[at(t, dim) + d] += ffn_out_[at(t, dim) + d];
        });
        break;
      case ResidualKind::Parallel:
      case ResidualKind::ParallelSharedNorm:
        if (c.residual == ResidualKind::Parallel) {
          norm_rows(L.ffn_norm, L.ffn_norm_b, x_.data(), T, xb2_.data());
          ffn_block(l, b, xb2_.data(), ffn_out_.data());
        } else {
          ffn_block(l, b, xb_.data(), ffn_out_.data());
        }
        per_token(T, [&](int t) {
          for (int d = 0; d < dim; ++d) x_[at(t, dim) + d] += attn_out_[at(t, dim) + d] + ffn_out_[at(t, dim) + d];
        });
        break;
    }
  }
  output_block(parts, b);
  for (const auto& p : parts) {
    EngineSequence& s = seqs_.at(p.id);
    for (auto& kv : s.kv)
      if (kv) kv->advance(p.count);
  }
}

}  // namespace ss
