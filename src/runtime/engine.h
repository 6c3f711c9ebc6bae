#pragma once
// The forward pass over a batch of (sequence, tokens). Every step appends the
// given tokens to their sequences' KV caches and returns logits. Sequences can
// mix prefill chunks and single decode tokens in one batch.
#include <memory>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "kv/block_pool.h"
#include "kv/policy.h"
#include "kv/pool_sizing.h"
#include "kv/sequence_kv.h"
#include "model/model.h"
#include "ops/matmul.h"
#include "ops/rope.h"
#include "util/result.h"
#include "util/thread_pool.h"

namespace ss {

struct EngineOptions {
  int threads = 1;
  int kv_blocks = 256;  // blocks in the pool, shared by all sequences
  int block_tokens = 16;
  int max_chunk = 64;  // most tokens of one sequence per internal step
  // Int8: Q4_0/Q8_0 weights take int8-rounded activations (llama.cpp's
  // arithmetic, faster); None: exact float activations for every type.
  ActQuant act_quant = ActQuant::None;
  // Blocks of the sliding layers' pool (models with sliding-window layers;
  // 0: as many as kv_blocks). Its blocks hold only the sliding layers, and
  // each sequence keeps just its native window there (a ring).
  int sliding_kv_blocks = 0;
  // A virtual sink: this logit joins every head's softmax denominator (a key
  // with zero value), on top of any learned sinks. 0 is softmax1.
  std::optional<float> sink_logit;
  // Element type of both KV pools: F32, F16, BF16, Q8_0 or Q4_0 (check
  // kv_type_usable for the model's kv_dim first).
  GgmlType kv_type = GgmlType::F32;
  // Multi-head attention scores up to four consecutive tokens of a chunk
  // together (Engine::query_tiles); bit for bit what one query at a time
  // gives, which false runs (the tests' reference).
  bool query_tiles = true;
  // KV in use (bytes, the pool's blocks) above which attention prefetches
  // the paged blocks ahead (AttnScoring::stream_kv): about what a core's L2
  // and its share of L3 hold. TinyLlama's 2044-key window (46 MB) decoded
  // 10-15% faster with it (F16; Q8_0 KV, 24 MB: 1.6-1.8x); below, the
  // requests would only cost. The same bits either way (0 or SIZE_MAX in
  // the tests).
  size_t stream_kv_bytes = size_t{4} << 20;
};

using SeqId = int32_t;

// A sequence's cache as plain data, for persistence: the resident text
// indices and, per index, K then V of every full-attention layer
// ([full layers][2] rows of kv_dim elements in kv_type, raw bytes); then the
// sliding layers' own window (its last min(n_seen, window - 1) indices, in
// order) the same way. Importing into an engine of another KV type converts
// the rows (through float).
struct SequenceState {
  KvPolicy policy;
  int64_t n_seen = 0;
  GgmlType kv_type = GgmlType::F32;
  std::vector<int64_t> indices;
  std::vector<uint8_t> rows;          // [indices][full layers][2][row_bytes(kv_type, kv_dim)]
  std::vector<uint8_t> sliding_rows;  // [sliding_indices][sliding layers][2][row bytes]
};
// Rows of kv_dim elements from one KV type to another (through float).
std::vector<uint8_t> convert_kv_rows(const std::vector<uint8_t>& rows, GgmlType from, GgmlType to, int kv_dim);

// Text indices sliding layers of native window w hold between steps after
// n_seen tokens (none when w == 0).
std::vector<int64_t> sliding_resident(int w, int64_t n_seen);

struct BatchItem {
  SeqId seq = -1;
  std::span<const int32_t> tokens;
  bool all_logits = false;  // logits for every token, not only the last
};

// Sees every attention distribution the engine computes (for inspection
// tools). Called from one thread; probs[j] belongs to key text index
// j < n_sinks ? j : first_window_key + (j - n_sinks).
class AttentionObserver {
 public:
  virtual ~AttentionObserver() = default;
  virtual void on_attention(int layer, int head, SeqId seq, int64_t query, int64_t n_sinks, int64_t first_window_key,
                            std::span<const float> probs) = 0;
};

// Sizes both pools (full layers under `p`, sliding layers under their native
// window) for `sequences` sequences of up to `tokens` tokens (kv/pool_sizing.h).
void size_kv_pools(EngineOptions& eo, const ModelConfig& c, const KvPolicy& p, int64_t tokens, int sequences = 1);

class Engine {
 public:
  Engine(std::shared_ptr<const Model> model, const EngineOptions& opts);

  const Model& model() const { return *model_; }
  const ModelConfig& config() const { return model_->config; }
  const EngineOptions& options() const { return opts_; }
  // The full-attention layers' pool (sequences' sinks and windows).
  BlockPool& pool() { return pool_; }
  const BlockPool& pool() const { return pool_; }
  // The sliding layers' pool, null for models without sliding layers.
  const BlockPool* sliding_pool() const { return swa_pool_.get(); }
  // KV bytes in use at the high-water mark of both pools.
  size_t peak_kv_bytes() const;
  size_t used_kv_bytes() const;
  ThreadPool& threads() { return threads_; }

  // Whether sequences under `policy` can run here (h2o with a quantized KV
  // type needs whole 32-blocks per head, and no attention observer).
  Status check_policy(const KvPolicy& policy) const;
  Result<SeqId> create_sequence(const KvPolicy& policy);
  void free_sequence(SeqId id);
  const SequenceKv* sequence(SeqId id) const;
  SequenceState export_sequence(SeqId id) const;
  Result<SeqId> import_sequence(const SequenceState& st);
  // Shares `blocks` (another sequence's complete sink blocks) read-only.
  Status adopt_sinks(SeqId id, const std::vector<BlockId>& blocks);
  SequenceKv* mutable_sequence(SeqId id);

  // nullptr to stop observing. While set, attention runs on one thread.
  void set_attention_observer(AttentionObserver* obs) { observer_ = obs; }

  // logits[i]: for item i, n_vocab floats for its last token, or one row per
  // token when all_logits. Bad ids or unknown sequences give an error before
  // any state changes; a full KV pool gives an error too.
  Status forward(std::span<const BatchItem> items, std::vector<std::vector<float>>& logits);

 private:
  struct RoundPart {
    SeqId id;
    SequenceKv* seq;
    const int32_t* tokens;
    int count;
    float* logits;  // rows for this part's tokens needing logits (or nullptr)
    bool all_logits;
    bool last_of_item;
  };
  // Where a layer's KV lives: full-attention layers in pool 0 under the
  // sequence's policy, sliding layers in pool 1 under their native window.
  enum KvGroup { kFull = 0, kSliding = 1 };
  struct EngineSequence {
    std::unique_ptr<SequenceKv> kv[2];  // [kFull], [kSliding] (null without sliding layers)
  };
  // One round's batch, passed explicitly to every layer block: T tokens of
  // one or more sequences, each with its text index and, per rotary, the
  // cos/sin at its text position and (full layers' sinks) at its cache
  // position.
  struct RoundBatch {
    int T = 0;
    std::vector<EngineSequence*> seq;            // [T]
    std::vector<SeqId> seq_id;                   // [T]
    std::vector<int64_t> pos;                    // [T] text index
    std::vector<uint8_t> sink_query;             // [T] needs a cache-position query for the sinks
    std::vector<uint8_t> h2o;                    // [T] its sequence's full layers run H2O
    std::vector<std::pair<int, int>> h2o_parts;  // (first token, count) of each H2O sequence
    struct Angles {
      std::vector<float> cos_t, sin_t, cos_c, sin_c;  // [T x pairs]
    };
    std::vector<Angles> angles;                 // [rotaries]
    int attn_parts[2] = {1, 1};                 // [KvGroup] threads each group's attention splits into
    std::vector<std::pair<int, int>> tiles[2];  // [KvGroup] query tiles (query_tiles), the same in every layer
    bool stream_kv[2] = {false, false};         // [KvGroup] KV past EngineOptions::stream_kv_bytes: prefetch
  };
  void prepare_round(std::span<RoundPart> parts, RoundBatch& b);
  void embed(std::span<RoundPart> parts, const RoundBatch& b);
  void attention_block(int layer, const RoundBatch& b, const float* in, float* out);
  void qkv_positions(int layer, const RoundBatch& b);
  void attention(int layer, const RoundBatch& b);
  // Query tiles of a round for one layer group: (first token, rows), every
  // token in one, in token order (engine_attention.cpp).
  void query_tiles(const RoundBatch& b, KvGroup group, std::vector<std::pair<int, int>>& tiles) const;
  void attention_observed(int layer, const RoundBatch& b);
  // H2O sequences' full layers: per (sequence, KV head), queries in text
  // order, each updating its lane's scores and evictions (docs/H2O.md).
  void attention_h2o(int layer, const RoundBatch& b);
  // Slots of this round's H2O tokens in a full layer's lanes, in text order.
  void place_h2o_tokens(int layer, const RoundBatch& b);
  void ffn_block(int layer, const RoundBatch& b, const float* in, float* out);
  void moe_block(int layer, const RoundBatch& b, const float* in, float* out);
  void norm_rows(const TensorView& w, const TensorView& bias, const float* in, int rows, float* out);
  void output_block(std::span<RoundPart> parts, const RoundBatch& b);
  void run_round(std::span<RoundPart> parts);
  // Per-token work between the matmuls, split across threads for big
  // batches. Tokens are independent, so the split never changes a result.
  template <typename Fn>
  void per_token(int T, Fn&& fn);
  int swa_pool_layers() const { return static_cast<int>(layer_group_.size()) - config().full_layers(); }
  // What both attention paths need to know of a layer: its pool and slot
  // there, scale, and the sink logits every head adds to its softmax
  // (learned and virtual: [n_sink_logits][n_heads]).
  struct LayerAttentionSetup {
    KvGroup group;
    const BlockPool* pool;
    int slot, block_tokens;
    float scale;
    int n_sink_logits = 0;
    std::vector<float> sink_logits;
  };
  LayerAttentionSetup attention_setup(int layer) const;

  std::shared_ptr<const Model> model_;
  EngineOptions opts_;
  BlockPool pool_;                       // full-attention layers
  std::unique_ptr<BlockPool> swa_pool_;  // sliding layers (null without any)
  std::vector<KvGroup> layer_group_;     // [n_layers]
  std::vector<int> layer_slot_;          // [n_layers] layer index inside its pool
  ThreadPool threads_;
  std::vector<RopeTable> ropes_;  // [rotaries]
  RopeStyle rope_style_ = RopeStyle::Neox;
  std::vector<float> alibi_slopes_;  // [n_heads] (ALiBi models)
  std::unordered_map<SeqId, EngineSequence> seqs_;
  SeqId next_id_ = 0;
  AttentionObserver* observer_ = nullptr;
  RoundBatch batch_;

  // Activations of the current round (reused buffers).
  std::vector<float> x_, xb_, xb2_, q_, qs_, k_, v_, att_, attn_out_, ffn_out_, hb_, hb2_;  // [T x ...]
  std::vector<float> qraw_;        // [T x q_dim] H2O tokens' queries before RoPE
  std::vector<int32_t> h2o_slot_;  // [T x n_kv_heads] where each H2O token's K/V went
  std::vector<float> router_, moe_in_, moe_g_, moe_u_, moe_y_;
  std::vector<std::vector<std::pair<int, float>>> moe_routed_;  // [experts] of (token, weight)
  std::vector<int> moe_order_;                                  // MoE scratch
  std::vector<int> logit_rows_;                                 // rows of x_ that need logits
  std::vector<float*> logit_outs_;
  std::vector<float> normed_, logits_buf_;  // [R x dim], [R x n_vocab]
};

}  // namespace ss
