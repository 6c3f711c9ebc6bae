// Attention over the paged cache for one layer: full layers walk the
// policy's sinks and window, sliding layers their own native window. Sink
// logits (learned or virtual) join the softmax denominator; ALiBi biases
// follow the keys' positions in the cache (STREAMING.md).
#include <algorithm>
#include <cmath>

#include "kv/positions.h"
#include "ops/attention.h"
#include "runtime/engine.h"
#include "util/check.h"

namespace ss {

Engine::LayerAttentionSetup Engine::attention_setup(int layer) const {
  const auto& c = config();
  LayerAttentionSetup a;
  a.group = layer_group_[static_cast<size_t>(layer)];
  a.pool = a.group == kFull ? &pool_ : swa_pool_.get();
  a.slot = layer_slot_[static_cast<size_t>(layer)];
  a.block_tokens = a.pool->block_tokens();
  a.scale = c.attention_scale();
  const TensorView& learned = model_->layers[static_cast<size_t>(layer)].sinks;
  if (!learned.empty()) {
    a.sink_logits.insert(a.sink_logits.end(), learned.f32(), learned.f32() + c.n_heads);
    ++a.n_sink_logits;
  }
  if (opts_.sink_logit) {
    a.sink_logits.insert(a.sink_logits.end(), static_cast<size_t>(c.n_heads), *opts_.sink_logit);
    ++a.n_sink_logits;
  }
  return a;
}

namespace {
// Cache position of a query and of the key at text index u, under the
// layer's policy: distances ALiBi reads.
struct CachePositions {
  const KvPolicy& pol;
  int64_t query;
  int64_t q() const { return query_cache_position(pol, query); }
  int64_t k(int64_t u) const { return cache_position(pol, u, query); }
};
}  // namespace

namespace {
// Rows in a query tile: four share each K row's load; their score sums
// (four chains a row) fill 16 of the 32 vector registers.
constexpr int kTileRows = 4;
}  // namespace

// Multi-head attention reads each key for one query head only, so
// consecutive tokens of a prefill chunk read the same keys one after
// another. A tile of them scores each key once for all (AttnRows: a row per
// token and query head), where their run lists cut the same 16-key chunks,
// so each token's result stays bit for bit its own (the same sinks, the
// first window key of every row in one chunk of one block). Groups of two
// query heads per KV head tile two tokens: a lone token's pair of heads
// wider than 16 is scored head by head with four chains each, as tile rows
// are; bigger groups (and small heads) score their heads together, in
// other chains. Under ALiBi each row adds its own biases (AttnRows' col0
// offsets). Not for heads of 8 or less or H2O.
void Engine::query_tiles(const RoundBatch& b, KvGroup group, std::vector<std::pair<int, int>>& tiles) const {
  const auto& c = config();
  tiles.clear();
  const int heads_per_kv = c.n_heads / c.n_kv_heads;
  const bool tiled =
      opts_.query_tiles && ((heads_per_kv == 1 && c.head_dim > 8) || (heads_per_kv == 2 && c.head_dim > 16));
  const int most = tiled ? kTileRows / heads_per_kv : 1;
  for (int t = 0; t < b.T;) {
    int n = 1;
    if (tiled && !(group == kFull && b.h2o[t])) {
      while (n < most && t + n < b.T && b.seq[t + n] == b.seq[t] && b.pos[t + n] == b.pos[t] + n) ++n;
      const SequenceKv& seq = *b.seq[t]->kv[group];
      const KvPolicy& pol = seq.policy();
      if (b.pos[t] < pol.sinks) n = 1;  // tokens would differ in sinks
      // Where a token's first window key sits: (block, chunk).
      auto first_chunk = [&](int64_t pos) {
        std::pair<BlockId, int> at{-1, 0};
        const int64_t w0 = pol.first_window_key(pos);
        seq.for_each_run(w0, w0 + 1, [&](BlockId blk, int off, int, int64_t) { at = {blk, off / kAttnChunk}; });
        return at;
      };
      if (n > 1) {
        const auto head = first_chunk(b.pos[t]);
        while (n > 1 && first_chunk(b.pos[t + n - 1]) != head) --n;
      }
    }
    tiles.emplace_back(t, n);
    t += n;
  }
}

void Engine::attention(int layer, const RoundBatch& b) {
  const auto& c = config();
  const int hd = c.head_dim, qd = c.q_dim();
  const int group = c.n_heads / c.n_kv_heads;
  const LayerAttentionSetup a = attention_setup(layer);
  const bool alibi = c.positions == PositionKind::Alibi;
  const auto& tiles = b.tiles[a.group];
  const bool stream_kv = b.stream_kv[a.group];
  // One task per (tile, KV head): the group's query heads (or the tile's
  // rows) walk the sink and window runs of the paged cache together, online
  // softmax, no gather.
  auto run = [&](size_t begin, size_t end) {
    thread_local std::vector<float> m, l, acc, scratch, head_sinks, qtile, qsink_tile;
    thread_local std::vector<KvRun> runs;
    const int most = std::max(group, kTileRows);
    m.resize(static_cast<size_t>(most));
    l.resize(static_cast<size_t>(most));
    acc.resize(static_cast<size_t>(most) * hd);
    scratch.resize(static_cast<size_t>(attn_scratch_floats(most, hd)));
    head_sinks.resize(static_cast<size_t>(a.n_sink_logits * most));
    qtile.resize(static_cast<size_t>(most) * hd);
    qsink_tile.resize(static_cast<size_t>(most) * hd);
    int row_lo[kTileRows], row_hi[kTileRows];
    float row_slopes[kTileRows], row_col0_shared[kTileRows], row_col0_window[kTileRows];
    // The run list of the tile whose KV head listed_kvh it was built for:
    // another KV head walks the same blocks, only its first element and its
    // queries differ.
    int listed = -1, listed_kvh = 0;
    for (size_t task = begin; task < end; ++task) {
      const int ti = static_cast<int>(task / static_cast<size_t>(c.n_kv_heads));
      const int kvh = static_cast<int>(task % static_cast<size_t>(c.n_kv_heads));
      const auto [t, n] = tiles[static_cast<size_t>(ti)];  // tokens t .. t + n - 1
      if (a.group == kFull && b.h2o[t]) continue;          // attention_h2o's
      const SequenceKv& seq = *b.seq[t]->kv[a.group];
      const KvPolicy& pol = seq.policy();
      const int last = t + n - 1;
      const int64_t pos = b.pos[t];
      auto q_off = [&](int u) { return static_cast<size_t>(u) * qd + static_cast<size_t>(kvh) * group * hd; };
      auto sink_q = [&](int u) {
        return a.group == kFull && b.sink_query[u] ? qs_.data() + q_off(u) : q_.data() + q_off(u);
      };
      const float* qt = q_.data() + q_off(t);
      const float* qsink = sink_q(t);
      const size_t group_floats = static_cast<size_t>(group) * hd;
      if (n > 1) {  // the tokens' groups of queries side by side, [n x group][hd]
        for (int i = 0; i < n; ++i) {
          std::copy_n(q_.data() + q_off(t + i), group_floats, qtile.data() + i * group_floats);
          std::copy_n(sink_q(t + i), group_floats, qsink_tile.data() + i * group_floats);
        }
        qt = qtile.data();
        qsink = qsink_tile.data();
      }
      const int g = group * n;
      const int64_t n_sinks = std::min<int64_t>(pol.sinks, pos + 1);
      const int64_t w0 = pol.first_window_key(pos);
      const size_t head_off = static_cast<size_t>(kvh) * hd;
      for (int s = 0; s < a.n_sink_logits; ++s)
        for (int h = 0; h < g; ++h)
          head_sinks[static_cast<size_t>(s * g + h)] =
              a.sink_logits[static_cast<size_t>(s * c.n_heads + kvh * group + h % group)];
      attn_online_init_sinks(g, hd, head_sinks.data(), a.n_sink_logits, m.data(), l.data(), acc.data());
      const CachePositions cp{pol, pos};
      // The sinks' and the window's runs in one list, one kernel call.
      if (ti == listed) {
        // In locals: the runs' stores could alias what the lambda captures
        // by reference, so the steps were recomputed for every run. A
        // tile's queries are in qtile whatever the KV head.
        const int d_elem = (kvh - listed_kvh) * hd;
        const ptrdiff_t d_q = n > 1 ? 0 : static_cast<ptrdiff_t>(d_elem) * group;
        for (KvRun& r : runs) {
          r.kv.elem0 += d_elem;
          r.q += d_q;
        }
      } else {
        runs.clear();
        auto visit = [&](const float* q) {
          return [&, q](BlockId blk, int off, int count, int64_t first) {
            const float col0 = alibi ? static_cast<float>(cp.k(first) - off - cp.q()) : 0.0f;
            // Field by field into the list: a whole KvRun built on the
            // stack and copied in was read back wider than it was written,
            // a store-forwarding stall per run (80% of this walk's time).
            KvRun& r = runs.emplace_back();
            r.kv = a.pool->head_view(blk, a.slot, static_cast<int>(head_off));
            r.q = q;
            r.first = off;
            r.count = count;
            r.col0 = col0;
          };
        };
        seq.for_each_run(0, n_sinks, visit(qsink));
        // The union of the rows' windows: from the first row's first key
        // to the last row's query.
        if (pos >= w0) seq.for_each_run(w0, b.pos[last] + 1, visit(qt));
      }
      listed = ti;
      listed_kvh = kvh;
      AttnScoring sc;
      sc.softcap = c.attn_softcap;
      if (alibi) sc.slopes = alibi_slopes_.data() + kvh * group;
      AttnRows tile;
      if (n > 1) {
        // Ordinals: the sinks, then the union's window keys from w0.
        tile.n_shared = static_cast<int>(n_sinks);
        for (int r = 0; r < g; ++r) {
          const int64_t pos_r = b.pos[t + r / group];
          row_lo[r] = static_cast<int>(n_sinks + pol.first_window_key(pos_r) - w0);
          row_hi[r] = static_cast<int>(n_sinks + pos_r + 1 - w0);
        }
        tile.lo = row_lo;
        tile.hi = row_hi;
        sc.rows = &tile;
        if (alibi) {
          // The runs' col0 are the first row's (pos); row r's differ by
          // where its own query sits, for sinks and for window keys apart
          // (kv/positions.h). Small whole numbers: exact in float.
          const int64_t s0 = pol.sinks;
          for (int r = 0; r < g; ++r) {
            const CachePositions cr{pol, b.pos[t + r / group]};
            row_slopes[r] = alibi_slopes_[static_cast<size_t>(kvh * group + r % group)];
            row_col0_shared[r] = static_cast<float>((cr.k(0) - cr.q()) - (cp.k(0) - cp.q()));
            row_col0_window[r] = static_cast<float>((cr.k(s0) - cr.q()) - (cp.k(s0) - cp.q()));
          }
          sc.slopes = row_slopes;
          tile.col0_shared = row_col0_shared;
          tile.col0_window = row_col0_window;
        }
      }
      sc.stream_kv = stream_kv;
      attn_online_update_runs(g, runs.data(), static_cast<int>(runs.size()), hd, a.scale, m.data(), l.data(),
                              acc.data(), scratch.data(),
                              alibi || sc.softcap > 0 || n > 1 || sc.stream_kv ? &sc : nullptr);
      for (int i = 0; i < n; ++i)
        attn_online_finish(group, hd, l.data() + i * group, acc.data() + static_cast<size_t>(i) * group * hd,
                           att_.data() + q_off(t + i));
    }
  };
  threads_.parallel_for(tiles.size() * static_cast<size_t>(c.n_kv_heads), run, b.attn_parts[a.group]);
  if (a.group == kFull && !b.h2o_parts.empty()) attention_h2o(layer, b);
}

// The inspector's path: full probability rows per head, handed to the observer.
void Engine::attention_observed(int layer, const RoundBatch& b) {
  const auto& c = config();
  const int hd = c.head_dim, qd = c.q_dim();
  const int group = c.n_heads / c.n_kv_heads;
  const LayerAttentionSetup a = attention_setup(layer);
  SS_CHECK_MSG(b.h2o_parts.empty(), "the attention inspector does not follow h2o's per-head caches");
  std::vector<float> scores, acc, extra, keys, values;
  for (int t = 0; t < b.T; ++t) {
    for (int h = 0; h < c.n_heads; ++h) {
      const SequenceKv& seq = *b.seq[t]->kv[a.group];
      const KvPolicy& pol = seq.policy();
      const int64_t pos = b.pos[t];
      const int kvh = h / group;
      const float* qt = q_.data() + static_cast<size_t>(t) * qd + static_cast<size_t>(h) * hd;
      const float* qsink = a.group == kFull && b.sink_query[t]
                               ? qs_.data() + static_cast<size_t>(t) * qd + static_cast<size_t>(h) * hd
                               : qt;
      const int64_t n_sinks = std::min<int64_t>(pol.sinks, pos + 1);
      const int64_t w0 = pol.first_window_key(pos);
      const int64_t n_win = pos >= w0 ? pos - w0 + 1 : 0;
      const auto n = static_cast<size_t>(n_sinks + n_win);
      scores.resize(n);
      values.resize(n * static_cast<size_t>(hd));  // [n][hd], decoded once while scoring
      const size_t head_off = static_cast<size_t>(kvh) * hd;
      const CachePositions cp{pol, pos};
      // Scores: sinks with the cache-position query, window with the text-position one.
      size_t j = 0;
      auto score_run = [&](const float* q) {
        return [&, q](BlockId blk, int off, int count, int64_t first) {
          keys.resize(static_cast<size_t>(count) * hd);
          kv_decode_head(a.pool->head_view(blk, a.slot, static_cast<int>(head_off)), off, count, hd, keys.data(),
                         values.data() + j * static_cast<size_t>(hd));
          attn_scores(q, keys.data(), count, count, hd, a.scale, scores.data() + j);
          if (const float cap = c.attn_softcap; cap > 0)
            for (int r = 0; r < count; ++r) scores[j + r] = cap * std::tanh(scores[j + r] / cap);
          if (c.positions == PositionKind::Alibi)
            for (int r = 0; r < count; ++r)
              scores[j + static_cast<size_t>(r)] +=
                  alibi_slopes_[static_cast<size_t>(h)] * static_cast<float>(cp.k(first + r) - cp.q());
          j += static_cast<size_t>(count);
        };
      };
      seq.for_each_run(0, n_sinks, score_run(qsink));
      seq.for_each_run(w0, w0 + n_win, score_run(qt));
      extra.clear();
      for (int s = 0; s < a.n_sink_logits; ++s) extra.push_back(a.sink_logits[static_cast<size_t>(s * c.n_heads + h)]);
      softmax_with_extra(scores.data(), static_cast<int>(n), extra.data(), a.n_sink_logits);
      observer_->on_attention(layer, h, b.seq_id[t], pos, n_sinks, w0, scores);
      acc.assign(static_cast<size_t>(hd), 0.0f);
      attn_accumulate(scores.data(), values.data(), hd, static_cast<int>(n), hd, acc.data());
      std::copy(acc.begin(), acc.end(), att_.data() + static_cast<size_t>(t) * qd + static_cast<size_t>(h) * hd);
    }
  }
}

}  // namespace ss
