// H2O's attention (docs/H2O.md): each (sequence, KV head) lane runs its
// round's queries in text order. A query sees the lane's entries up to
// itself at cache positions 0..n (their rank), scores them with a query
// rotated so that every key's distance is its cache distance (keys stay
// rotated at their text index), takes a two-pass softmax whose
// probabilities also feed the entries' scores, and then the lane evicts.
// Chunks and single tokens run the same additions in the same order.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "ops/attention.h"
#include "ops/rope.h"
#include "runtime/engine.h"
#include "util/check.h"

namespace ss {

void Engine::attention_h2o(int layer, const RoundBatch& b) {
  const auto& c = config();
  const int hd = c.head_dim, qd = c.q_dim(), nkv = c.n_kv_heads;
  const int group = c.n_heads / nkv;
  const LayerAttentionSetup a = attention_setup(layer);
  const bool rope = c.positions == PositionKind::Rope;
  const bool alibi = c.positions == PositionKind::Alibi;
  const int r = c.layer_attention[static_cast<size_t>(layer)].rotary;
  const int pairs = rope ? ropes_[static_cast<size_t>(r)].pairs() : 0;
  auto run = [&](size_t begin, size_t end) {
    thread_local std::vector<float> scores, keys, values, qrot, cos_v, sin_v, extra;
    qrot.resize(static_cast<size_t>(group) * hd);
    cos_v.resize(static_cast<size_t>(pairs));
    sin_v.resize(static_cast<size_t>(pairs));
    extra.resize(static_cast<size_t>(a.n_sink_logits));
    for (size_t task = begin; task < end; ++task) {
      const auto [t0, count] = b.h2o_parts[task / static_cast<size_t>(nkv)];
      const int kvh = static_cast<int>(task % static_cast<size_t>(nkv));
      SequenceKv& seq = *b.seq[static_cast<size_t>(t0)]->kv[kFull];
      const KvPolicy& pol = seq.policy();
      H2oLane& lane = seq.lane(a.slot * nkv + kvh);
      const int elem0 = kvh * hd;
      for (int t = t0; t < t0 + count; ++t) {
        const int64_t pos = b.pos[static_cast<size_t>(t)];
        const auto seen = lane.visible(pos);
        const size_t n = seen.size();
        const int64_t qc = static_cast<int64_t>(n) - 1;  // the query's cache position
        SS_CHECK(qc == std::min(pos, pol.capacity()));   // as prepare_round's sink query assumed
        const size_t q_off = static_cast<size_t>(t) * qd + static_cast<size_t>(elem0) * group;
        const float* qt = q_.data() + q_off;
        const float* qs = b.sink_query[static_cast<size_t>(t)] ? qs_.data() + q_off : qt;
        scores.resize(static_cast<size_t>(group) * n);  // [group][n]
        keys.resize(static_cast<size_t>(hd));
        values.resize(n * static_cast<size_t>(hd));  // [n][hd]
        for (size_t j = 0; j < n; ++j) {
          const H2oEntry& e = seen[j];
          // The query position that gives this key (stored rotated at its
          // text index) the distance its cache position has.
          const int64_t target = e.text + qc - static_cast<int64_t>(j);
          const float* qv = qt;
          if (rope && target != pos) {
            if (target == qc && b.sink_query[static_cast<size_t>(t)]) {
              qv = qs;
            } else {
              std::memcpy(qrot.data(), qraw_.data() + q_off, sizeof(float) * qrot.size());
              ropes_[static_cast<size_t>(r)].angles(target, cos_v.data(), sin_v.data());
              rope_apply(qrot.data(), group, hd, pairs, cos_v.data(), sin_v.data(), rope_style_);
              qv = qrot.data();
            }
          }
          const KvSlot s = seq.slot_at(e.slot);
          kv_decode_head(a.pool->head_view(s.block, a.slot, elem0), s.offset, 1, hd, keys.data(),
                         values.data() + j * static_cast<size_t>(hd));
          for (int h = 0; h < group; ++h) {
            float dot = 0;
            for (int d = 0; d < hd; ++d) dot += qv[h * hd + d] * keys[static_cast<size_t>(d)];
            float sc = dot * a.scale;
            if (const float cap = c.attn_softcap; cap > 0) sc = cap * std::tanh(sc / cap);
            if (alibi)
              sc += alibi_slopes_[static_cast<size_t>(kvh * group + h)] *
                    static_cast<float>(static_cast<int64_t>(j) - qc);
            scores[static_cast<size_t>(h) * n + j] = sc;
          }
        }
        float* out = att_.data() + q_off;
        std::fill(out, out + static_cast<size_t>(group) * hd, 0.0f);
        for (int h = 0; h < group; ++h) {
          float* p = scores.data() + static_cast<size_t>(h) * n;
          for (int s = 0; s < a.n_sink_logits; ++s)
            extra[static_cast<size_t>(s)] = a.sink_logits[static_cast<size_t>(s * c.n_heads + kvh * group + h)];
          softmax_with_extra(p, static_cast<int>(n), extra.data(), a.n_sink_logits);
          attn_accumulate_scalar(p, values.data(), hd, static_cast<int>(n), hd, out + static_cast<size_t>(h) * hd);
        }
        // H2O's score: the attention each entry took, summed over the group's heads.
        for (size_t j = 0; j < n; ++j) {
          double mass = 0;
          for (int h = 0; h < group; ++h) mass += scores[static_cast<size_t>(h) * n + j];
          lane.add_score(j, mass);
        }
        lane.cut_back(pol, pos);
      }
    }
  };
  threads_.parallel_for(b.h2o_parts.size() * static_cast<size_t>(nkv), run);
}

}  // namespace ss
