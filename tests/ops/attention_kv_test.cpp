// The fused attention over typed KV blocks (F32, F16, BF16, Q8_0, Q4_0),
// in every clone the CPU and the cap allow, against a twin that dequantizes
// whole rows with format/'s dequantize_row and runs the scalar two-pass
// attention. Odd head sizes and heads that straddle Q8_0/Q4_0 blocks.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "cpu_levels.h"
#include "ops/attention.h"

namespace ss {
namespace {

// One block of `bt` tokens, rows kv_dim wide, in `type`'s layout
// (attention.h's KvHeadView; V dimension-major too if v_dm), filled from
// random floats.
struct TypedBlock {
  GgmlType type;
  int bt, kv_dim;
  bool v_dm;
  size_t row_bytes;
  std::vector<uint8_t> k, v;
  std::vector<float> k_f, v_f;  // [bt][kv_dim]: what the block holds, dequantized by format/

  TypedBlock(GgmlType t, int tokens, int dim, std::mt19937& rng, bool v_dim_major = false)
      : type(t), bt(tokens), kv_dim(dim), v_dm(v_dim_major) {
    std::uniform_real_distribution<float> u(-2, 2);
    row_bytes = ::ss::row_bytes(t, dim);
    std::vector<float> kr(static_cast<size_t>(dim)), vr(kr.size());
    k.assign(row_bytes * static_cast<size_t>(bt), 0);
    v.assign(row_bytes * static_cast<size_t>(bt), 0);
    k_f.resize(static_cast<size_t>(bt) * dim);
    v_f.resize(k_f.size());
    const size_t es = kv_k_dim_major(t) ? row_bytes / static_cast<size_t>(dim) : 0;
    for (int r = 0; r < bt; ++r) {
      for (int d = 0; d < dim; ++d) {
        kr[static_cast<size_t>(d)] = u(rng);
        vr[static_cast<size_t>(d)] = u(rng);
      }
      std::vector<uint8_t> krow(row_bytes), vrow(row_bytes);
      quantize_row(t, kr.data(), krow.data(), dim);
      quantize_row(t, vr.data(), vrow.data(), dim);
      dequantize_row(t, krow.data(), k_f.data() + static_cast<size_t>(r) * dim, dim);
      dequantize_row(t, vrow.data(), v_f.data() + static_cast<size_t>(r) * dim, dim);
      put(k, es == 0, r, krow);
      put(v, !v_dm, r, vrow);
    }
  }
  // Token r's row into a K or V half, token-major or dimension-major
  // (element (d, r) at d * bt + r).
  void put(std::vector<uint8_t>& half, bool token_major, int r, const std::vector<uint8_t>& row) const {
    if (token_major) {
      std::copy(row.begin(), row.end(), half.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(r) * row_bytes));
      return;
    }
    const size_t es = row_bytes / static_cast<size_t>(kv_dim);
    for (int d = 0; d < kv_dim; ++d)
      std::copy_n(row.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(d) * es), es,
                  half.begin() + static_cast<std::ptrdiff_t>((static_cast<size_t>(d) * bt + r) * es));
  }
  // Token r's K and V elements set to +inf, as a reused block's stale
  // slots may hold (float types): attention must not read them.
  void poison(int r) {
    const size_t es = row_bytes / static_cast<size_t>(kv_dim);
    std::vector<uint8_t> row(row_bytes);
    const uint32_t bits = type == GgmlType::F32 ? 0x7f800000u : type == GgmlType::F16 ? 0x7c00u : 0x7f80u;
    for (int d = 0; d < kv_dim; ++d) std::memcpy(row.data() + static_cast<size_t>(d) * es, &bits, es);
    put(k, false, r, row);
    put(v, !v_dm, r, row);
  }
  KvHeadView view(int elem0) const { return KvHeadView{type, k.data(), v.data(), bt, row_bytes, elem0, v_dm}; }
};

// The layouts a cache of this type and head size may use: V token-major, and
// for float types with heads of 8 or less also dimension-major (a pool
// chooses it where the AVX-512 clone runs, but every clone reads it).
std::vector<bool> v_layouts(GgmlType type, int hd) {
  if (kv_k_dim_major(type) && hd <= kVDimMajorMaxHeadDim) return {false, true};
  return {false};
}

constexpr GgmlType kTypes[] = {GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q8_0, GgmlType::Q4_0};

void check_TypedBlocksMatchDequantizedTwin() {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-2, 2);
  for (GgmlType type : kTypes)
    for (int hd : {3, 8, 13, 16, 40, 64, 128, 256})
      for (int g : {1, 3, 4}) {
        const int heads = 3;
        const int kv_dim = (hd * heads + 31) / 32 * 32;  // quantized rows: whole blocks; heads straddle them
        for (int bt : {7, 16, 37, 48})
          for (bool v_dm : v_layouts(type, hd)) {
            const TypedBlock blk(type, bt, kv_dim, rng, v_dm);
            for (int head = 0; head < heads; ++head) {
              const int elem0 = head * hd;
              std::vector<float> q(static_cast<size_t>(g) * hd);
              for (auto& x : q) x = u(rng);
              const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
              std::vector<float> m(g), l(g), acc(static_cast<size_t>(g) * hd), out(acc.size()),
                  scratch(static_cast<size_t>(attn_scratch_floats(g, hd)));
              attn_online_init(g, hd, m.data(), l.data(), acc.data());
              // Uneven runs over the block's keys, as the paged cache's walk gives them.
              for (int r0 = 0; r0 < bt;) {
                const int count = std::min(bt - r0, 1 + (r0 * 5) % 11);
                attn_online_update_kv(q.data(), g, blk.view(elem0), r0, count, hd, scale, m.data(), l.data(),
                                      acc.data(), scratch.data());
                r0 += count;
              }
              attn_online_finish(g, hd, l.data(), acc.data(), out.data());
              // Twin: the dequantized rows, dimension-major K, two-pass softmax.
              std::vector<float> kc(static_cast<size_t>(hd) * bt), vr(static_cast<size_t>(bt) * hd);
              for (int r = 0; r < bt; ++r)
                for (int d = 0; d < hd; ++d) {
                  kc[static_cast<size_t>(d) * bt + r] = blk.k_f[static_cast<size_t>(r) * kv_dim + elem0 + d];
                  vr[static_cast<size_t>(r) * hd + d] = blk.v_f[static_cast<size_t>(r) * kv_dim + elem0 + d];
                }
              std::vector<float> kd(kc.size()), vd(vr.size());
              kv_decode_head(blk.view(elem0), 0, bt, hd, kd.data(), vd.data());
              ASSERT_EQ(kd, kc) << type_name(static_cast<uint32_t>(type));
              ASSERT_EQ(vd, vr);
              for (int h = 0; h < g; ++h) {
                std::vector<float> p(static_cast<size_t>(bt)), want(static_cast<size_t>(hd), 0.0f);
                attn_scores_scalar(q.data() + h * hd, kc.data(), bt, bt, hd, scale, p.data());
                softmax_scalar(p.data(), bt);
                attn_accumulate_scalar(p.data(), vr.data(), hd, bt, hd, want.data());
                for (int d = 0; d < hd; ++d)
                  ASSERT_NEAR(out[static_cast<size_t>(h) * hd + d], want[d], 2e-5f)
                      << type_name(static_cast<uint32_t>(type)) << " hd=" << hd << " g=" << g << " bt=" << bt
                      << " v_dm=" << v_dm << " head=" << head << " h=" << h << " d=" << d;
              }
            }
          }
      }
}

TEST(AttentionKv, TypedBlocksMatchDequantizedTwin) {
  test::at_every_clone_level(check_TypedBlocksMatchDequantizedTwin);
}

// One call over a query's whole run list, as the engine makes it: partial
// runs over 24 blocks of 16 keys (more than one kAttnSpan span, spans that
// start and end inside runs), the first two runs (the "sinks") scored with
// another query than the rest, ALiBi slopes with each run's own col0, and
// soft-capping; against the scalar two-pass twin over the concatenated keys.
// With the stream_kv hint, the same bits.
void check_RunListMatchesTwoPassTwin() {
  std::mt19937 rng(17);
  std::uniform_real_distribution<float> u(-2, 2);
  for (GgmlType type : kTypes)
    for (int hd : {8, 16, 13, 64, 5, 256})
      for (int g : {1, 2, 3, 4, 5, 8})
        for (int shaping = 0; shaping < 3; ++shaping)  // none, ALiBi, softcap + ALiBi
          for (bool v_dm : v_layouts(type, hd)) {
            const int heads = 2, kv_dim = (hd * heads + 31) / 32 * 32, bt = 16, n_blocks = 24;
            std::vector<TypedBlock> blocks;
            for (int b = 0; b < n_blocks; ++b) blocks.emplace_back(type, bt, kv_dim, rng, v_dm);
            const int elem0 = hd;  // the second KV head
            std::vector<float> q_sink(static_cast<size_t>(g) * hd), q_win(q_sink.size()),
                slopes(static_cast<size_t>(g));
            for (auto& x : q_sink) x = u(rng);
            for (auto& x : q_win) x = u(rng);
            for (auto& x : slopes) x = 0.05f + 0.1f * std::abs(u(rng));
            AttnScoring scoring;
            if (shaping >= 1) scoring.slopes = slopes.data();
            if (shaping == 2) scoring.softcap = 3.0f;
            std::vector<KvRun> runs;
            std::vector<float> col0s;
            float pos = -400;  // cache distance of the next key to the query
            for (int b = 0; b < n_blocks; ++b) {
              const int first = (b * 7) % 5, count = bt - first - (b % 3);
              if (kv_k_dim_major(type))
                for (int r = 0; r < bt; ++r)
                  if (r < first || r >= first + count) blocks[static_cast<size_t>(b)].poison(r);
              runs.push_back(KvRun{blocks[static_cast<size_t>(b)].view(elem0), b < 2 ? q_sink.data() : q_win.data(),
                                   first, count, pos - static_cast<float>(first)});
              pos += static_cast<float>(count);
            }
            const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
            std::vector<float> m(g), l(g), acc(static_cast<size_t>(g) * hd), out(acc.size()),
                scratch(static_cast<size_t>(attn_scratch_floats(g, hd)));
            attn_online_init(g, hd, m.data(), l.data(), acc.data());
            attn_online_update_runs(g, runs.data(), static_cast<int>(runs.size()), hd, scale, m.data(), l.data(),
                                    acc.data(), scratch.data(), shaping ? &scoring : nullptr);
            attn_online_finish(g, hd, l.data(), acc.data(), out.data());
            {
              // The stream_kv hint (prefetching blocks ahead) changes no bit.
              AttnScoring streamed = scoring;
              streamed.stream_kv = true;
              std::vector<float> out2(out.size());
              attn_online_init(g, hd, m.data(), l.data(), acc.data());
              attn_online_update_runs(g, runs.data(), static_cast<int>(runs.size()), hd, scale, m.data(), l.data(),
                                      acc.data(), scratch.data(), &streamed);
              attn_online_finish(g, hd, l.data(), acc.data(), out2.data());
              ASSERT_EQ(std::memcmp(out.data(), out2.data(), out.size() * sizeof(float)), 0)
                  << type_name(static_cast<uint32_t>(type)) << " hd=" << hd << " g=" << g << " shaping=" << shaping;
            }
            for (int h = 0; h < g; ++h) {
              std::vector<float> p, vr;
              for (const KvRun& run : runs) {
                const auto& blk = blocks[static_cast<size_t>(&run - runs.data())];
                std::vector<float> kc(static_cast<size_t>(hd) * run.count), vv(static_cast<size_t>(run.count) * hd),
                    sc(static_cast<size_t>(run.count));
                kv_decode_head(blk.view(elem0), run.first, run.count, hd, kc.data(), vv.data());
                attn_scores_scalar(run.q + h * hd, kc.data(), run.count, run.count, hd, scale, sc.data());
                for (int r = 0; r < run.count; ++r) {
                  float x = sc[static_cast<size_t>(r)];
                  if (shaping == 2) x = 3.0f * std::tanh(x / 3.0f);
                  if (shaping >= 1)
                    x += slopes[static_cast<size_t>(h)] * (run.col0 + static_cast<float>(run.first + r));
                  p.push_back(x);
                }
                vr.insert(vr.end(), vv.begin(), vv.end());
              }
              softmax_scalar(p.data(), static_cast<int>(p.size()));
              std::vector<float> want(static_cast<size_t>(hd), 0.0f);
              attn_accumulate_scalar(p.data(), vr.data(), hd, static_cast<int>(p.size()), hd, want.data());
              for (int d = 0; d < hd; ++d)
                ASSERT_NEAR(out[static_cast<size_t>(h) * hd + d], want[d], 2e-5f)
                    << type_name(static_cast<uint32_t>(type)) << " hd=" << hd << " g=" << g << " shaping=" << shaping
                    << " v_dm=" << v_dm << " h=" << h << " d=" << d;
            }
          }
}

TEST(AttentionKv, RunListMatchesTwoPassTwin) { test::at_every_clone_level(check_RunListMatchesTwoPassTwin); }

// A query tile (AttnRows): rows of one KV head's queries over the union of
// their run lists, against each query alone over its own list, bit for bit.
// Rows start their windows anywhere in the union's first 16-key chunk and
// end anywhere: one key apart (a prefill tile) or hundreds (whole chunks
// and spans masked for a row); sinks or none, soft-capping, sink logits;
// two tokens of two query heads each against each token's group alone;
// ALiBi with sinks (each row its own slope and position: the runs carry the
// first row's col0, AttnRows the other rows' offsets);
// blocks of 16 and 24 keys (chunks past a block's columns are padded).
void check_QueryTileRowsEqualLoneQueriesBitForBit() {
  std::mt19937 rng(23);
  std::uniform_real_distribution<float> u(-2, 2);
  for (GgmlType type : kTypes)
    for (int hd : {13, 16, 48, 64, 128, 256})
      for (int bt : {16, 24})
        for (int variant = 0; variant < 5; ++variant) {  // plain; sinks + softcap; sink logits, no sinks; GQA; ALiBi
          // Rows, and query heads per token (variant 3: two tokens of two
          // heads, as the engine tiles heads wider than 16 in groups of two).
          const int rows = variant >= 3 ? 4 : 2 + variant, group = variant == 3 && hd > 16 ? 2 : 1;
          const int heads = 2, kv_dim = (hd * heads + 31) / 32 * 32, elem0 = hd;
          const int n_sinks = variant == 2 ? 0 : 4, n_blocks = 20;
          const TypedBlock sink_blk(type, bt, kv_dim, rng);
          std::vector<TypedBlock> blocks;
          for (int b = 0; b < n_blocks; ++b) blocks.emplace_back(type, bt, kv_dim, rng);
          // The union's window: from column w_off of block 0 to key `total`.
          const int w_off = bt == 24 ? 17 : 3, total = n_blocks * bt - w_off - 5;
          std::vector<int> lo(static_cast<size_t>(rows)), hi(lo.size());
          for (int i = 0; i < rows; ++i) {
            // Window starts within the first chunk of the first block; ends a
            // key apart, or far apart. A token's heads share theirs.
            const int tok = i / group, tokens = rows / group;
            const int start = std::min({w_off + tok * 3, (w_off / kAttnChunk + 1) * kAttnChunk - 1, bt - 1}) - w_off;
            const int end = variant == 1 ? total - (tokens - 1 - tok) * 97 : total - (tokens - 1 - tok);
            lo[static_cast<size_t>(i)] = n_sinks + start;
            hi[static_cast<size_t>(i)] = n_sinks + end;
          }
          std::vector<float> qs(static_cast<size_t>(rows) * hd), qw(qs.size()), sink_logits(static_cast<size_t>(rows)),
              slopes(static_cast<size_t>(rows));
          for (int i = 0; i < rows; ++i) slopes[static_cast<size_t>(i)] = 0.03f + 0.05f * static_cast<float>(i);
          for (auto& x : qs) x = u(rng);
          for (auto& x : qw) x = u(rng);
          for (auto& x : sink_logits) x = variant == 2 ? 1.5f : 0.0f;
          const int n_sink_logits = variant == 2 ? 1 : 0;
          const bool alibi = variant == 4;
          AttnScoring shaping;
          if (variant == 1) shaping.softcap = 2.5f;
          const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
          // ALiBi: row i's query is its last key (union key index qk(i)), at
          // cache position qc(i) (the sinks, then its window from its first
          // key). A window run's col0 (its block's offset 0 against the
          // query) is the keys' distance, a sink run's the cache positions'.
          auto qk = [&](int i) { return w_off + hi[static_cast<size_t>(i)] - 1 - n_sinks; };
          auto qc = [&](int i) { return n_sinks + hi[static_cast<size_t>(i)] - lo[static_cast<size_t>(i)] - 1; };
          // The runs over window keys [a, b) of the union (a counted from
          // w_off), with row i's col0.
          auto window_runs = [&](int a, int b, const float* q, int i, std::vector<KvRun>& runs) {
            for (int key = w_off + a; key < w_off + b;) {
              const int blk = key / bt, off = key % bt, n = std::min(bt - off, w_off + b - key);
              const float col0 = alibi ? static_cast<float>(blk * bt - qk(i)) : 0.0f;
              runs.push_back(KvRun{blocks[static_cast<size_t>(blk)].view(elem0), q, off, n, col0});
              key += n;
            }
          };
          auto sink_col0 = [&](int i) { return alibi ? static_cast<float>(-qc(i)) : 0.0f; };
          std::vector<KvRun> runs;
          if (n_sinks > 0) runs.push_back(KvRun{sink_blk.view(elem0), qs.data(), 0, n_sinks, sink_col0(0)});
          window_runs(0, total, qw.data(), 0, runs);
          std::vector<float> col0_shared(static_cast<size_t>(rows)), col0_window(col0_shared.size());
          for (int i = 0; i < rows; ++i) {
            col0_shared[static_cast<size_t>(i)] = static_cast<float>(qc(0) - qc(i));
            col0_window[static_cast<size_t>(i)] = static_cast<float>(qk(0) - qk(i));
          }
          AttnRows tile{n_sinks, lo.data(), hi.data()};
          AttnScoring tiled = shaping;
          tiled.rows = &tile;
          if (alibi) {
            tiled.slopes = slopes.data();
            tile.col0_shared = col0_shared.data();
            tile.col0_window = col0_window.data();
          }
          std::vector<float> m(static_cast<size_t>(rows)), l(m.size()), acc(static_cast<size_t>(rows) * hd),
              out(acc.size()), scratch(static_cast<size_t>(attn_scratch_floats(rows, hd)));
          attn_online_init_sinks(rows, hd, sink_logits.data(), n_sink_logits, m.data(), l.data(), acc.data());
          attn_online_update_runs(rows, runs.data(), static_cast<int>(runs.size()), hd, scale, m.data(), l.data(),
                                  acc.data(), scratch.data(), &tiled);
          attn_online_finish(rows, hd, l.data(), acc.data(), out.data());
          for (int i = 0; i < rows; i += group) {  // each token's group of heads alone
            std::vector<KvRun> own;
            const float* qsi = qs.data() + static_cast<size_t>(i) * hd;
            const float* qwi = qw.data() + static_cast<size_t>(i) * hd;
            if (n_sinks > 0) own.push_back(KvRun{sink_blk.view(elem0), qsi, 0, n_sinks, sink_col0(i)});
            window_runs(lo[static_cast<size_t>(i)] - n_sinks, hi[static_cast<size_t>(i)] - n_sinks, qwi, i, own);
            AttnScoring lone = shaping;
            if (alibi) lone.slopes = slopes.data() + i;
            std::vector<float> mi(static_cast<size_t>(group)), li(mi.size()), acci(static_cast<size_t>(group) * hd),
                want(acci.size()), scratch1(static_cast<size_t>(attn_scratch_floats(group, hd)));
            attn_online_init_sinks(group, hd, sink_logits.data() + i, n_sink_logits, mi.data(), li.data(), acci.data());
            attn_online_update_runs(group, own.data(), static_cast<int>(own.size()), hd, scale, mi.data(), li.data(),
                                    acci.data(), scratch1.data(), variant == 1 || alibi ? &lone : nullptr);
            attn_online_finish(group, hd, li.data(), acci.data(), want.data());
            // The first element that differs, if one does.
            size_t d = 0;
            while (d < want.size() && std::memcmp(&want[d], &out[static_cast<size_t>(i) * hd + d], sizeof(float)) == 0)
              ++d;
            ASSERT_EQ(d, want.size()) << type_name(static_cast<uint32_t>(type)) << " hd=" << hd << " bt=" << bt
                                      << " variant=" << variant << " row=" << i << " element " << d << ": "
                                      << (d < want.size() ? want[d] : 0.0f) << " vs "
                                      << (d < want.size() ? out[static_cast<size_t>(i) * hd + d] : 0.0f);
          }
        }
}

TEST(AttentionKv, QueryTileRowsEqualLoneQueriesBitForBit) {
  test::at_every_clone_level(check_QueryTileRowsEqualLoneQueriesBitForBit);
}

// A key whose score is more than 69 below the max gets probability exactly
// 0 (below e^-69 ~ 1e-30 it changes no sum that holds the max's 1, and its
// products with values would fall into the slow subnormal range); one 60
// below keeps its e^-60 share. Values of 1e25 make both visible: key 1
// (score -60) adds e^-60 * 1e25 ~ 0.087 to dimension 0, key 2 (score -70)
// would add 4e-6 to dimension 1 (F32; half floats and Q8_0 hold 6e4, too
// little to show either, and are checked against the same twin). Every
// kernel path: heads of 8 (V either layout) and 16, float and quantized
// caches.
void check_KeysFarBelowTheMaxGetNoProbability() {
  for (GgmlType type : {GgmlType::F32, GgmlType::F16, GgmlType::Q8_0})
    for (int hd : {8, 16})
      for (bool v_dm : v_layouts(type, hd)) {
        const int bt = 16, kv_dim = 32;
        std::mt19937 rng(3);
        TypedBlock blk(type, bt, kv_dim, rng, v_dm);
        // Rows: K of key r is (s_r, 0, ...) with q = (1, 0, ...) and scale 1;
        // V of key 0 is (1, 1, 0...), key 1 (1e25 in dim 0), key 2 (1e25 in dim 1).
        const float scores[3] = {0.0f, -60.0f, -70.0f};
        for (int r = 0; r < 3; ++r) {
          std::vector<float> kr(kv_dim, 0.0f), vr(kv_dim, 0.0f);
          kr[0] = scores[r];
          if (r == 0) vr[0] = vr[1] = 1.0f;
          if (r > 0) vr[static_cast<size_t>(r - 1)] = 1e25f;
          std::vector<uint8_t> krow(blk.row_bytes), vrow(blk.row_bytes);
          if (type != GgmlType::F32 && r > 0) vr[static_cast<size_t>(r - 1)] = 6e4f;  // half (and Q8_0's scale) range
          quantize_row(type, kr.data(), krow.data(), kv_dim);
          quantize_row(type, vr.data(), vrow.data(), kv_dim);
          blk.put(blk.k, !kv_k_dim_major(type), r, krow);
          blk.put(blk.v, !v_dm, r, vrow);
        }
        std::vector<float> q(static_cast<size_t>(hd), 0.0f), out(q.size()), acc(q.size());
        q[0] = 1.0f;
        float m, l;
        std::vector<float> scratch(static_cast<size_t>(attn_scratch_floats(1, hd)));
        attn_online_init(1, hd, &m, &l, acc.data());
        attn_online_update_kv(q.data(), 1, blk.view(0), 0, 3, hd, 1.0f, &m, &l, acc.data(), scratch.data());
        attn_online_finish(1, hd, &l, acc.data(), out.data());
        std::vector<float> k_f(static_cast<size_t>(hd) * 3), v_f(static_cast<size_t>(hd) * 3);
        kv_decode_head(blk.view(0), 0, 3, hd, k_f.data(), v_f.data());
        const double p1 = std::exp(static_cast<double>(k_f[1]) - k_f[0]);  // the dequantized scores
        const double want0 = (v_f[0] + p1 * v_f[static_cast<size_t>(hd)]) / (1 + p1);
        const double want1 = v_f[1] / (1 + p1);  // key 2: nothing
        EXPECT_NEAR(out[0], want0, 1e-6 * std::abs(want0)) << type_name(static_cast<uint32_t>(type)) << " hd " << hd;
        EXPECT_NEAR(out[1], want1, 1e-6) << type_name(static_cast<uint32_t>(type)) << " hd " << hd << " v_dm " << v_dm;
        if (type == GgmlType::F32) {
          EXPECT_GT(out[0], 1.05f);  // key 1's share is there
        }
      }
}

TEST(AttentionKv, KeysFarBelowTheMaxGetNoProbability) {
  test::at_every_clone_level(check_KeysFarBelowTheMaxGetNoProbability);
}

// Half floats' edge values (subnormals, infinities and their neighbours)
// convert exactly in the vector path: V = identity rows read back through a
// one-key attention (probability 1).
void check_HalfConversionIsExactAtEdges() {
  const uint16_t bits[] = {0x0000, 0x8401, 0x0001, 0x03ff, 0x0400, 0x3c00, 0xbc00, 0x7bff,
                           0xfbff, 0x3555, 0x8001, 0x1234, 0x7c00, 0xfc00, 0x5a5a, 0x0200};
  constexpr int hd = 16;
  std::vector<uint8_t> k(2 * hd, 0), v(2 * hd);
  std::memcpy(v.data(), bits, sizeof bits);
  const float q[hd] = {};
  float m, l, acc[hd], out[hd];
  std::vector<float> scratch(static_cast<size_t>(attn_scratch_floats(1, hd)));
  attn_online_init(1, hd, &m, &l, acc);
  attn_online_update_kv(q, 1, KvHeadView{GgmlType::F16, k.data(), v.data(), 1, 2 * hd, 0}, 0, 1, hd, 1.0f, &m, &l, acc,
                        scratch.data());
  attn_online_finish(1, hd, &l, acc, out);
  for (int d = 0; d < hd; ++d) {
    float want;
    dequantize_row(GgmlType::F16, bits + d, &want, 1);
    EXPECT_EQ(std::memcmp(&out[d], &want, 4), 0) << std::hex << bits[d] << " got " << out[d] << " want " << want;
  }
}

TEST(AttentionKv, HalfConversionIsExactAtEdges) { test::at_every_clone_level(check_HalfConversionIsExactAtEdges); }

}  // namespace
}  // namespace ss
