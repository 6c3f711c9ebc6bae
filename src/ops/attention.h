#pragma once
// Attention inner loops over a run of keys that sit contiguously in one KV
// block: K dimension-major (key r, dimension d at k_cols[d*col_stride + r]),
// V token-major (row stride v_stride). Compiled for AVX-512, AVX2+FMA and
// baseline x86-64, picked at each call within the CPU cap (ops/clones.h);
// the scalar versions are the reference twins used by tests. The clones
// agree with each other and the twins within float rounding (FMA or not),
// not bit for bit; on one CPU and cap, results depend only on the list of
// runs a call is given (not on thread count or what ran before).
#include <cstddef>

#include "format/ggml_types.h"
#include "ops/clones.h"

namespace ss {

// Keys are scored kAttnChunk at a time (one vector's worth on AVX-512), and
// the softmax's running max and sum move once per span of up to kAttnSpan
// keys (float-type caches), so small heads do not pay a horizontal max, sum
// and rescale every 16 keys.
inline constexpr int kAttnChunk = 16;
inline constexpr int kAttnSpan = 256;

// scores[r] = scale * sum_d q[d] * k_cols[d*col_stride + r] for r < count.
void attn_scores(const float* q, const float* k_cols, int col_stride, int count, int hd, float scale, float* scores);
// acc[d] += sum_r probs[r] * v_rows[r*stride + d].
void attn_accumulate(const float* probs, const float* v_rows, int stride, int count, int hd, float* acc);
// In-place softmax; returns nothing, probabilities sum to 1.
void softmax(float* x, int n);

// Fused attention over paged KV with online softmax: one call per run of
// keys [first, first + count) that sit contiguously in a block, for the `g`
// query heads sharing one KV head (GQA: each key and value row is read once
// for all of them). k_cols and v_rows point at the block's column / row 0;
// every K row must be readable for col_stride floats (scores are computed
// on whole kChunk-lane chunks from column 0 and masked, so a short run in a
// block of 16 or more columns needs no copy). State per head h: running max
// m[h], running sum l[h] and the unnormalised output acc[h*hd..]; start from
// attn_online_init, end with attn_online_finish. scratch holds
// attn_scratch_floats(g, hd) floats.
inline int attn_scratch_floats(int g, int hd) { return g * kAttnSpan + 2 * hd * kAttnChunk; }
void attn_online_init(int g, int hd, float* m, float* l, float* acc);
// As attn_online_init, with one extra logit per head in the softmax
// denominator (a virtual key with zero value: gpt-oss's learned sinks,
// softmax1 for logit 0). sink_logits: [n_sinks][g], all added.
void attn_online_init_sinks(int g, int hd, const float* sink_logits, int n_sinks, float* m, float* l, float* acc);
// How scores are shaped after q.k * scale, in this order: soft-capping
// (softcap > 0: s = softcap * tanh(s / softcap), Gemma 2), then ALiBi (slopes
// not null: the score of head h for the key at block column c gets
// slopes[h] * (col0 + c), col0 being that column's key position minus the
// query position, <= 0 for every visible key).
struct AttnRows;
struct AttnScoring {
  float softcap = 0.0f;
  const float* slopes = nullptr;  // [g]
  float col0 = 0.0f;
  const AttnRows* rows = nullptr;  // a query tile (below); slopes then per row
  // Not shaping but a memory hint: the caller's KV is larger than the caches
  // hold, so runs of heads wider than 16 ask for each block's K two blocks
  // ahead and each chunk's V rows while its scores are taken (paged blocks
  // lie apart, and the hardware prefetchers stop at each). Float and
  // quantized caches alike. The same results either way.
  bool stream_kv = false;
};
// A query tile: the g "heads" are g rows, the queries of one KV head for
// consecutive tokens of one sequence (MHA), which share the K and V they
// read. Keys are counted in run order over the whole list (their ordinals);
// row h sees the first n_shared (the sinks) and those in [lo[h], hi[h]).
// Each row's scores and sums come out bit for bit as for that query alone
// over its own runs if those cut the same 16-key chunks (the same blocks,
// its first window key in the union's first chunk, its list a prefix of
// the union's otherwise) and heads are wider than 8 (an 8-wide head sums
// V in key pairs, which a shorter run would pair differently). "Bit for
// bit" also rests on GCC contracting the same multiply-adds into FMAs in
// the row and lone-query forms alike (-O2 and up): a semantically neutral
// rewrite of the row scoring's dispatch once moved an ulp (BF16, heads of
// 16), so AttentionKv.QueryTileRowsEqualLoneQueriesBitForBit checks every
// clone, and ChunkedPrefill.QueryTilesEqualOneQueryAtATimeBitForBit the
// engine.
struct AttnRows {
  int n_shared = 0;
  const int* lo = nullptr;  // [g]
  const int* hi = nullptr;  // [g]
  // ALiBi: the runs' col0 are those of one query, row h's are theirs plus
  // these offsets, one for the n_shared keys (sinks: their cache positions
  // stay while the query's moves) and one for the rest (a key's distance
  // to the query is the tokens'). Whole numbers, so the sum is exactly the
  // col0 a lone query computes. Null without ALiBi.
  const float* col0_shared = nullptr;  // [g]
  const float* col0_window = nullptr;  // [g]
};
void attn_online_update(const float* q, int g, const float* k_cols, int col_stride, const float* v_rows, int v_stride,
                        int first, int count, int hd, float scale, float* m, float* l, float* acc, float* scratch,
                        const AttnScoring* scoring = nullptr);
void attn_online_finish(int g, int hd, const float* l, const float* acc, float* out);

// One KV head's keys and values in a block of a typed cache (F32, F16, BF16,
// Q8_0, Q4_0). Float types keep K dimension-major (k: the block's K, element
// (d, key r) at k[d * col_stride + r]); Q8_0/Q4_0 keep K token-major like V,
// one row of ggml blocks of 32 per token (a block may span heads). V is
// token-major (row r at v + r * row_bytes) unless v_dim_major: then it is
// laid out as float-type K is (element (d, key r) at v[d * col_stride + r]).
// The head's first element within a token's row (its first K dimension
// row) is elem0.
struct KvHeadView {
  GgmlType type = GgmlType::F32;
  const void* k = nullptr;
  const void* v = nullptr;
  int col_stride = 0;    // K columns per dimension row (float types)
  size_t row_bytes = 0;  // bytes per token row (V; K of quantized types)
  int elem0 = 0;
  bool v_dim_major = false;
};
// Does this cache type keep K dimension-major?
inline bool kv_k_dim_major(GgmlType t) { return t == GgmlType::F32 || t == GgmlType::F16 || t == GgmlType::BF16; }
// The widest head whose V a pool may keep dimension-major (the kernels that
// read that layout size their sums to it).
inline constexpr int kVDimMajorMaxHeadDim = 8;
// Should a cache of this type for heads this wide keep V dimension-major
// too, on this CPU? Heads of 8 or less where the AVX-512 clone runs: a
// token's V row of one head is then half a vector, and summing it token by
// token costs more shuffles and broadcasts than multiply-adds;
// dimension-major, one vector holds one dimension of 16 keys, multiplied
// lane by lane with their probabilities (BM_AttentionRuns F16 hd 8: 1.35-1.45x).
// Wider heads fill whole vectors token-major; the AVX2 clone, with half the
// registers, reads dimension-major V 1.25-1.3x slower than token-major.
inline bool kv_v_dim_major_suits(GgmlType t, int head_dim) {
  return kv_k_dim_major(t) && head_dim <= kVDimMajorMaxHeadDim && clone_level() == CloneLevel::Avx512;
}
// attn_online_update over a typed block: each key and value element is
// decoded in registers as it is read (no dequantised copy of the block).
void attn_online_update_kv(const float* q, int g, const KvHeadView& kv, int first, int count, int hd, float scale,
                           float* m, float* l, float* acc, float* scratch, const AttnScoring* scoring = nullptr);
// A run of keys for attn_online_update_runs: keys [first, first + count) of
// one block, scored with query q ([g][hd]: the sinks may see another query
// than the window), ALiBi's col0 as in AttnScoring (the scoring argument's
// col0 is ignored).
struct KvRun {
  KvHeadView kv;
  const float* q = nullptr;
  int first = 0, count = 0;
  float col0 = 0.0f;
};
// attn_online_update_kv over every run of a query in one call (all of one
// cache type): float-type caches score spans of kAttnSpan keys across runs,
// so the softmax bookkeeping is per span, not per 16-key block.
void attn_online_update_runs(int g, const KvRun* runs, int n_runs, int hd, float scale, float* m, float* l, float* acc,
                             float* scratch, const AttnScoring* scoring = nullptr);
// The head's K and V elements of keys [first, first + count) as floats:
// k_out [hd][count] (dimension-major), v_out [count][hd]. For the inspector
// and the tests' twins.
void kv_decode_head(const KvHeadView& kv, int first, int count, int hd, float* k_out, float* v_out);

// softmax over x[0..n) and extra logits that take probability but are not
// returned (sinks); in place.
void softmax_with_extra(float* x, int n, const float* extra, int n_extra);
// ggml's ALiBi slopes for n_heads heads (max_bias 8 for MPT): with n2 the
// largest power of two <= n_heads, heads h < n2 get 2^(-max_bias/n2)^(h+1),
// the others 2^(-max_bias/2/n2)^(2(h-n2)+1).
void alibi_slopes(int n_heads, float max_bias, float* out);

void softmax_scalar(float* x, int n);
void attn_scores_scalar(const float* q, const float* k_cols, int col_stride, int count, int hd, float scale,
                        float* scores);
void attn_accumulate_scalar(const float* probs, const float* v_rows, int stride, int count, int hd, float* acc);

}  // namespace ss
