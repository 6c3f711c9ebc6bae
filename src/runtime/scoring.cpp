#include "runtime/scoring.h"

#include <algorithm>

#include "ops/activations.h"

namespace ss {

namespace {

double sum_of(std::span<const double> v) {
  double s = 0;
  for (double x : v) s += x;
  return s;
}

// Frees the sequence on every exit path.
struct SeqGuard {
  Engine& e;
  SeqId id;
  ~SeqGuard() { e.free_sequence(id); }
};

Result<std::vector<double>> score_cached(Engine& engine, std::span<const int32_t> tokens, const KvPolicy& policy,
                                         const ScoreProgress& progress) {
  SS_ASSIGN_OR_RETURN(const SeqId id, engine.create_sequence(policy));
  SeqGuard guard{engine, id};
  const int n_vocab = engine.config().n_vocab;
  const size_t chunk = static_cast<size_t>(engine.options().max_chunk);
  std::vector<double> nll;
  nll.reserve(tokens.size());
  std::vector<std::vector<float>> logits;
  for (size_t start = 0; start + 1 < tokens.size(); start += chunk) {
    // Feed tokens[start .. end); each predicts its successor.
    const size_t end = std::min(start + chunk, tokens.size() - 1);
    const BatchItem item{id, tokens.subspan(start, end - start), true};
    SS_TRY(engine.forward(std::span<const BatchItem>(&item, 1), logits));
    for (size_t i = start; i < end; ++i)
      nll.push_back(nll_of(logits[0].data() + (i - start) * n_vocab, n_vocab, tokens[i + 1]));
    if (progress) progress(static_cast<int64_t>(end), static_cast<int64_t>(tokens.size() - 1), sum_of(nll));
  }
  return nll;
}

Result<std::vector<double>> score_recompute(Engine& engine, std::span<const int32_t> tokens, int64_t L,
                                            const ScoreProgress& progress) {
  const int n_vocab = engine.config().n_vocab;
  const int per_seq =
      blocks_per_sequence(KvPolicy::dense(), L, engine.options().block_tokens, engine.options().max_chunk);
  const int parallel = std::max(1, std::min(32, engine.pool().free_blocks() / std::max(1, per_seq)));
  if (engine.pool().free_blocks() < per_seq)
    return make_error("KV pool too small for recompute:" + std::to_string(L) + " (needs " + std::to_string(per_seq) +
                      " blocks)");
  const size_t n_pred = tokens.size() > 0 ? tokens.size() - 1 : 0;
  std::vector<double> nll(n_pred);
  std::vector<std::vector<float>> logits;
  // Several independent windows run as one batch of fresh sequences.
  for (size_t i0 = 0; i0 < n_pred; i0 += static_cast<size_t>(parallel)) {
    const size_t i1 = std::min(n_pred, i0 + static_cast<size_t>(parallel));
    std::vector<SeqId> ids;
    std::vector<BatchItem> items;
    for (size_t i = i0; i < i1; ++i) {
      auto id = engine.create_sequence(KvPolicy::dense());
      if (!id.ok()) {
        for (SeqId made : ids) engine.free_sequence(made);
        return id.error();
      }
      ids.push_back(id.value());
      const size_t b = i + 1 >= static_cast<size_t>(L) ? i + 1 - static_cast<size_t>(L) : 0;
      items.push_back({id.value(), tokens.subspan(b, i + 1 - b), false});
    }
    const Status st = engine.forward(items, logits);
    for (SeqId id : ids) engine.free_sequence(id);
    if (!st.ok()) return st.error();
    for (size_t i = i0; i < i1; ++i) nll[i] = nll_of(logits[i - i0].data(), n_vocab, tokens[i + 1]);
    if (progress)
      progress(static_cast<int64_t>(i1), static_cast<int64_t>(n_pred),
               sum_of(std::span<const double>(nll).subspan(0, i1)));
  }
  return nll;
}

}  // namespace

Result<std::vector<double>> score_tokens(Engine& engine, std::span<const int32_t> tokens, const StreamMode& mode,
                                         const ScoreProgress& progress) {
  if (mode.recompute()) return score_recompute(engine, tokens, mode.recompute_len, progress);
  return score_cached(engine, tokens, mode.policy, progress);
}

Result<std::vector<float>> recompute_logits(Engine& engine, std::span<const int32_t> window) {
  SS_ASSIGN_OR_RETURN(const SeqId id, engine.create_sequence(KvPolicy::dense()));
  SeqGuard guard{engine, id};
  std::vector<std::vector<float>> logits;
  const BatchItem item{id, window, false};
  SS_TRY(engine.forward(std::span<const BatchItem>(&item, 1), logits));
  return std::move(logits[0]);
}

}  // namespace ss
