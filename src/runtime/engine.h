#pragma once
// The forward pass over a batch of (sequence, tokens). Every step appends the
// given tokens to their sequences' KV caches and returns logits. Sequences can
// mix prefill chunks and single decode tokens in one batch.
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "kv/block_pool.h"
#include "kv/policy.h"
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
};

using SeqId = int32_t;

// A sequence's cache as plain data, for persistence: the resident text
// indices and, per index, K then V of every layer ([layers][2][kv_dim]).
struct SequenceState {
  KvPolicy policy;
  int64_t n_seen = 0;
  std::vector<int64_t> indices;
  std::vector<float> rows;
};

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

// Blocks one sequence needs at most under a policy (dense: for `tokens` tokens).
int blocks_needed(const KvPolicy& policy, int64_t tokens, int block_tokens, int max_chunk);

class Engine {
 public:
  Engine(std::shared_ptr<const Model> model, const EngineOptions& opts);

  const Model& model() const { return *model_; }
  const ModelConfig& config() const { return model_->config; }
  const EngineOptions& options() const { return opts_; }
  BlockPool& pool() { return pool_; }
  const BlockPool& pool() const { return pool_; }
  ThreadPool& threads() { return threads_; }

  // Recompute is a scoring/generation mode on top of dense sequences, not a
  // cache policy: create_sequence rejects it.
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
  void run_round(std::span<RoundPart> parts);
  void attention(int layer, int n_tok, int parts);
  void attention_observed(int layer, int n_tok);

  std::shared_ptr<const Model> model_;
  EngineOptions opts_;
  BlockPool pool_;
  ThreadPool threads_;
  RopeTable rope_;
  std::unordered_map<SeqId, std::unique_ptr<SequenceKv>> seqs_;
  SeqId next_id_ = 0;
  AttentionObserver* observer_ = nullptr;
  std::vector<SeqId> tok_seq_id_;

  // Per-token metadata and activations of the current round (reused buffers).
  std::vector<SequenceKv*> tok_seq_;
  std::vector<int64_t> tok_pos_;
  std::vector<uint8_t> tok_has_sink_q_;
  std::vector<float> x_, xb_, q_, qs_, k_, v_, att_, hb_, hb2_, tmp_;  // [T x ...]
  std::vector<float> cos_t_, sin_t_, cos_c_, sin_c_;                   // [T x pairs]
  std::vector<int> logit_rows_;                                        // rows of x_ that need logits
  std::vector<float*> logit_outs_;
  std::vector<float> normed_, logits_buf_;  // [R x dim], [R x n_vocab]
};

}  // namespace ss
