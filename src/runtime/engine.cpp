#include "runtime/engine.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kv/positions.h"
#include "ops/activations.h"
#include "ops/attention.h"
#include "ops/matmul.h"
#include "ops/norm.h"
#include "runtime/kernel_layouts.h"
#include "util/check.h"

namespace ss {

int blocks_needed(const KvPolicy& policy, int64_t tokens, int block_tokens, int max_chunk) {
  const int64_t B = block_tokens;
  if (policy.bounded()) return static_cast<int>((policy.sinks + B - 1) / B + (policy.window + max_chunk + B - 1) / B);
  return static_cast<int>((tokens + B - 1) / B);
}

Engine::Engine(std::shared_ptr<const Model> model, const EngineOptions& opts)
    : model_(with_kernel_layouts(std::move(model), opts.act_quant)),
      opts_(opts),
      pool_(BlockPoolConfig{opts.kv_blocks, opts.block_tokens, model_->config.n_layers, model_->config.kv_dim()}),
      threads_(opts.threads),
      rope_(model_->config.rope_dim, model_->config.rope_base) {
  SS_CHECK(opts.max_chunk > 0);
}

Result<SeqId> Engine::create_sequence(const KvPolicy& policy) {
  if (policy.kind == PolicyKind::Recompute)
    return make_error("policy " + policy.name() + " is evaluated by re-running the window; it has no cache");
  const SeqId id = next_id_++;
  seqs_[id] = std::make_unique<SequenceKv>(pool_, policy, opts_.max_chunk);
  return id;
}

void Engine::free_sequence(SeqId id) { seqs_.erase(id); }

const SequenceKv* Engine::sequence(SeqId id) const {
  auto it = seqs_.find(id);
  return it == seqs_.end() ? nullptr : it->second.get();
}

SequenceKv* Engine::mutable_sequence(SeqId id) {
  auto it = seqs_.find(id);
  return it == seqs_.end() ? nullptr : it->second.get();
}

SequenceState Engine::export_sequence(SeqId id) const {
  const SequenceKv& seq = *seqs_.at(id);
  SequenceState st;
  st.policy = seq.policy();
  st.n_seen = seq.n_seen();
  st.indices = seq.resident();
  const int kvd = config().kv_dim();
  for (int64_t u : st.indices) {
    const KvSlot s = seq.slot(u);
    for (int l = 0; l < config().n_layers; ++l) {
      const size_t at = st.rows.size();
      st.rows.resize(at + 2 * static_cast<size_t>(kvd));
      pool_.load(s.block, l, s.offset, st.rows.data() + at, st.rows.data() + at + kvd);
    }
  }
  return st;
}

Result<SeqId> Engine::import_sequence(const SequenceState& st) {
  const size_t per = static_cast<size_t>(config().n_layers) * 2 * static_cast<size_t>(config().kv_dim());
  if (st.rows.size() != st.indices.size() * per) return make_error("sequence state: row data does not match the model");
  SS_ASSIGN_OR_RETURN(const SeqId id, create_sequence(st.policy));
  SequenceKv& seq = *seqs_.at(id);
  if (auto r = seq.restore(st.n_seen, st.indices); !r.ok()) {
    free_sequence(id);
    return r.error();
  }
  const int kvd = config().kv_dim();
  const float* src = st.rows.data();
  for (int64_t u : st.indices) {
    const KvSlot s = seq.slot(u);
    for (int l = 0; l < config().n_layers; ++l) {
      pool_.store(s.block, l, s.offset, src, src + kvd);
      src += 2 * static_cast<size_t>(kvd);
    }
  }
  return id;
}

Status Engine::adopt_sinks(SeqId id, const std::vector<BlockId>& blocks) {
  auto* seq = mutable_sequence(id);
  if (!seq) return make_error("unknown sequence");
  if (seq->n_seen() != 0) return make_error("adopt_sinks: sequence is not empty");
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
      parts.push_back({items[i].seq, seqs_[items[i].seq].get(), items[i].tokens.data() + done[i], count, out,
                       items[i].all_logits, last});
      done[i] += count;
    }
    if (parts.empty()) break;
    for (auto& p : parts) SS_TRY(p.seq->reserve(p.count));
    run_round(parts);
  }
  return ok_status();
}

void Engine::run_round(std::span<RoundPart> parts) {
  const auto& c = config();
  const Model& m = *model_;
  int T = 0;
  for (const auto& p : parts) T += p.count;
  const int dim = c.dim, qd = c.q_dim(), kvd = c.kv_dim(), hid = c.hidden_dim, pairs = c.rope_dim / 2;
  auto sz = [&](int w) { return static_cast<size_t>(T) * static_cast<size_t>(w); };
  x_.resize(sz(dim));
  xb_.resize(sz(dim));
  tmp_.resize(sz(dim));
  q_.resize(sz(qd));
  qs_.resize(sz(qd));
  att_.resize(sz(qd));
  k_.resize(sz(kvd));
  v_.resize(sz(kvd));
  hb_.resize(sz(hid));
  hb2_.resize(sz(hid));
  cos_t_.resize(sz(pairs));
  sin_t_.resize(sz(pairs));
  cos_c_.resize(sz(pairs));
  sin_c_.resize(sz(pairs));
  tok_seq_.resize(static_cast<size_t>(T));
  tok_seq_id_.resize(static_cast<size_t>(T));
  tok_pos_.resize(static_cast<size_t>(T));
  tok_has_sink_q_.resize(static_cast<size_t>(T));

  int i = 0;
  for (const auto& p : parts) {
    for (int j = 0; j < p.count; ++j, ++i) {
      const int64_t t = p.seq->n_seen() + j;
      tok_seq_[i] = p.seq;
      tok_seq_id_[i] = p.id;
      tok_pos_[i] = t;
      embedding_row(m.tok_embd, p.tokens[j], x_.data() + static_cast<size_t>(i) * dim);
      rope_.angles(t, cos_t_.data() + static_cast<size_t>(i) * pairs, sin_t_.data() + static_cast<size_t>(i) * pairs);
      const KvPolicy& pol = p.seq->policy();
      const bool sink_q = pol.sinks > 0 && position_offset(pol, t) > 0;
      tok_has_sink_q_[i] = sink_q;
      if (sink_q)
        rope_.angles(query_cache_position(pol, t), cos_c_.data() + static_cast<size_t>(i) * pairs,
                     sin_c_.data() + static_cast<size_t>(i) * pairs);
    }
  }

  // Attention work is the same in every layer: split it (or not) once per round.
  int64_t attn_work = 0;
  for (int t = 0; t < T; ++t) attn_work += std::min<int64_t>(tok_seq_[t]->cached_entries() + t + 1, tok_pos_[t] + 1);
  attn_work *= static_cast<int64_t>(qd) * 2;
  const int attn_parts =
      observer_ ? 1 : static_cast<int>(std::clamp<int64_t>(attn_work / (1 << 16), 1, threads_.size()));

  // Per-token work between the matmuls: split across threads for big
  // batches (a 64-token step spends milliseconds here), inline otherwise.
  // Tokens are independent, so the split never changes a result.
  auto per_token = [&](auto&& fn) {
    if (T < 8 || threads_.size() == 1) {
      for (int t = 0; t < T; ++t) fn(t);
      return;
    }
    threads_.parallel_for(static_cast<size_t>(T), [&](size_t b, size_t e) {
      for (size_t t = b; t < e; ++t) fn(static_cast<int>(t));
    });
  };
  auto add_residual = [&](int t) {
    float* xt = x_.data() + static_cast<size_t>(t) * dim;
    const float* rt = tmp_.data() + static_cast<size_t>(t) * dim;
    for (int e = 0; e < dim; ++e) xt[e] += rt[e];
  };

  for (int l = 0; l < c.n_layers; ++l) {
    const LayerWeights& L = m.layers[static_cast<size_t>(l)];
    per_token([&](int t) {
      rms_norm(x_.data() + static_cast<size_t>(t) * dim, L.attn_norm.f32(), dim, c.rms_eps,
               xb_.data() + static_cast<size_t>(t) * dim);
    });
    const MatmulOut qkv[] = {{&L.wq, q_.data()}, {&L.wk, k_.data()}, {&L.wv, v_.data()}};
    matmul_shared_input(qkv, xb_.data(), T, threads_, opts_.act_quant);
    if (c.qkv_bias) {
      for (int t = 0; t < T; ++t) {
        for (int d = 0; d < qd; ++d) q_[static_cast<size_t>(t) * qd + d] += L.bq.f32()[d];
        for (int d = 0; d < kvd; ++d) {
          k_[static_cast<size_t>(t) * kvd + d] += L.bk.f32()[d];
          v_[static_cast<size_t>(t) * kvd + d] += L.bv.f32()[d];
        }
      }
    }
    per_token([&](int t) {
      const float* ct = cos_t_.data() + static_cast<size_t>(t) * pairs;
      const float* st = sin_t_.data() + static_cast<size_t>(t) * pairs;
      float* kt = k_.data() + static_cast<size_t>(t) * kvd;
      rope_apply(kt, c.n_kv_heads, c.head_dim, pairs, ct, st, c.rope_style);
      const KvSlot s = tok_seq_[t]->slot(tok_pos_[t]);
      pool_.store(s.block, l, s.offset, kt, v_.data() + static_cast<size_t>(t) * kvd);
      float* qt = q_.data() + static_cast<size_t>(t) * qd;
      if (tok_has_sink_q_[t]) {
        float* qst = qs_.data() + static_cast<size_t>(t) * qd;
        std::memcpy(qst, qt, sizeof(float) * qd);
        rope_apply(qst, c.n_heads, c.head_dim, pairs, cos_c_.data() + static_cast<size_t>(t) * pairs,
                   sin_c_.data() + static_cast<size_t>(t) * pairs, c.rope_style);
      }
      rope_apply(qt, c.n_heads, c.head_dim, pairs, ct, st, c.rope_style);
    });
    attention(l, T, attn_parts);
    matmul(L.wo, att_.data(), T, tmp_.data(), threads_, opts_.act_quant);
    per_token([&](int t) {
      add_residual(t);
      rms_norm(x_.data() + static_cast<size_t>(t) * dim, L.ffn_norm.f32(), dim, c.rms_eps,
               xb_.data() + static_cast<size_t>(t) * dim);
    });
    const MatmulOut gate_up[] = {{&L.w_gate, hb_.data()}, {&L.w_up, hb2_.data()}};
    matmul_shared_input(gate_up, xb_.data(), T, threads_, opts_.act_quant);
    per_token([&](int t) {
      float* h = hb_.data() + static_cast<size_t>(t) * hid;
      swiglu(h, hb2_.data() + static_cast<size_t>(t) * hid, hid, h);
    });
    matmul(L.w_down, hb_.data(), T, tmp_.data(), threads_, opts_.act_quant);
    per_token(add_residual);
  }

  // Logits only for the rows that need them, as one batched matmul.
  logit_rows_.clear();
  logit_outs_.clear();
  i = 0;
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
  if (!logit_rows_.empty()) {
    const int R = static_cast<int>(logit_rows_.size());
    normed_.resize(static_cast<size_t>(R) * dim);
    logits_buf_.resize(static_cast<size_t>(R) * c.n_vocab);
    for (int r = 0; r < R; ++r)
      rms_norm(x_.data() + static_cast<size_t>(logit_rows_[r]) * dim, m.output_norm.f32(), dim, c.rms_eps,
               normed_.data() + static_cast<size_t>(r) * dim);
    matmul(m.output, normed_.data(), R, logits_buf_.data(), threads_, opts_.act_quant);
    for (int r = 0; r < R; ++r)
      std::memcpy(logit_outs_[r], logits_buf_.data() + static_cast<size_t>(r) * c.n_vocab, sizeof(float) * c.n_vocab);
  }
  for (const auto& p : parts) p.seq->advance(p.count);
}

void Engine::attention(int layer, int T, int parts) {
  if (observer_) return attention_observed(layer, T);
  const auto& c = config();
  const int hd = c.head_dim, qd = c.q_dim(), kvd = c.kv_dim();
  const int group = c.n_heads / c.n_kv_heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const int bt = pool_.block_tokens();
  // One task per (token, KV head): the group's query heads walk the sink and
  // window runs of the paged cache together, online softmax, no gather.
  auto run = [&](size_t begin, size_t end) {
    thread_local std::vector<float> m, l, acc, scratch;
    m.resize(static_cast<size_t>(group));
    l.resize(static_cast<size_t>(group));
    acc.resize(static_cast<size_t>(group) * hd);
    scratch.resize(static_cast<size_t>(attn_scratch_floats(group, hd)));
    for (size_t task = begin; task < end; ++task) {
      const int t = static_cast<int>(task / static_cast<size_t>(c.n_kv_heads));
      const int kvh = static_cast<int>(task % static_cast<size_t>(c.n_kv_heads));
      const SequenceKv& seq = *tok_seq_[t];
      const KvPolicy& pol = seq.policy();
      const int64_t pos = tok_pos_[t];
      const size_t q_off = static_cast<size_t>(t) * qd + static_cast<size_t>(kvh) * group * hd;
      const float* qt = q_.data() + q_off;
      const float* qsink = tok_has_sink_q_[t] ? qs_.data() + q_off : qt;
      const int64_t n_sinks = std::min<int64_t>(pol.sinks, pos + 1);
      const int64_t w0 = pol.first_window_key(pos);
      const size_t head_off = static_cast<size_t>(kvh) * hd;
      attn_online_init(group, hd, m.data(), l.data(), acc.data());
      auto visit = [&](const float* q) {
        return [&, q](BlockId b, int off, int count, int64_t) {
          attn_online_update(q, group, pool_.k(b, layer) + head_off * bt, bt, pool_.v(b, layer) + head_off, kvd, off,
                             count, hd, scale, m.data(), l.data(), acc.data(), scratch.data());
        };
      };
      seq.for_each_run(0, n_sinks, visit(qsink));
      if (pos >= w0) seq.for_each_run(w0, pos + 1, visit(qt));
      attn_online_finish(group, hd, l.data(), acc.data(), att_.data() + q_off);
    }
  };
  threads_.parallel_for(static_cast<size_t>(T) * static_cast<size_t>(c.n_kv_heads), run, parts);
}

// The inspector's path: full probability rows per head, handed to the observer.
void Engine::attention_observed(int layer, int T) {
  const auto& c = config();
  const int hd = c.head_dim, qd = c.q_dim(), kvd = c.kv_dim();
  const int group = c.n_heads / c.n_kv_heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const int bt = pool_.block_tokens();

  auto run = [&](size_t begin, size_t end) {
    thread_local std::vector<float> scores;
    thread_local std::vector<float> acc;
    for (size_t task = begin; task < end; ++task) {
      const int t = static_cast<int>(task / static_cast<size_t>(c.n_heads));
      const int h = static_cast<int>(task % static_cast<size_t>(c.n_heads));
      const SequenceKv& seq = *tok_seq_[t];
      const KvPolicy& pol = seq.policy();
      const int64_t pos = tok_pos_[t];
      const int kvh = h / group;
      const float* qt = q_.data() + static_cast<size_t>(t) * qd + static_cast<size_t>(h) * hd;
      const float* qsink =
          tok_has_sink_q_[t] ? qs_.data() + static_cast<size_t>(t) * qd + static_cast<size_t>(h) * hd : qt;
      const int64_t n_sinks = std::min<int64_t>(pol.sinks, pos + 1);
      const int64_t w0 = pol.first_window_key(pos);
      const int64_t n_win = pos >= w0 ? pos - w0 + 1 : 0;
      const auto n = static_cast<size_t>(n_sinks + n_win);
      scores.resize(n);
      const size_t head_off = static_cast<size_t>(kvh) * hd;
      // Scores: sinks with the cache-position query, window with the text-position one.
      size_t j = 0;
      auto score_run = [&](const float* q) {
        return [&, q](BlockId b, int off, int count, int64_t) {
          attn_scores(q, pool_.k(b, layer) + head_off * bt + off, bt, count, hd, scale, scores.data() + j);
          j += static_cast<size_t>(count);
        };
      };
      seq.for_each_run(0, n_sinks, score_run(qsink));
      seq.for_each_run(w0, w0 + n_win, score_run(qt));
      softmax(scores.data(), static_cast<int>(n));
      if (observer_) observer_->on_attention(layer, h, tok_seq_id_[t], pos, n_sinks, w0, scores);
      acc.assign(static_cast<size_t>(hd), 0.0f);
      j = 0;
      auto mix_run = [&](BlockId b, int off, int count, int64_t) {
        attn_accumulate(scores.data() + j, pool_.v(b, layer) + static_cast<size_t>(off) * kvd + head_off, kvd, count,
                        hd, acc.data());
        j += static_cast<size_t>(count);
      };
      seq.for_each_run(0, n_sinks, mix_run);
      seq.for_each_run(w0, w0 + n_win, mix_run);
      std::copy(acc.begin(), acc.end(), att_.data() + static_cast<size_t>(t) * qd + static_cast<size_t>(h) * hd);
    }
  };
  run(0, static_cast<size_t>(T) * static_cast<size_t>(c.n_heads));
}

}  // namespace ss
