#pragma once
// The answer's shape, whichever way it was asked for: a JSON schema
// (json_grammar.h) or a GBNF grammar (gbnf_matcher.h), behind one
// interface for the server's scheduler and the CLI.
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "model/model.h"
#include "model/tokenizer.h"
#include "sample/gbnf.h"
#include "sample/gbnf_matcher.h"
#include "sample/json_grammar.h"
#include "sample/json_schema.h"
#include "sample/token_trie.h"

namespace ss {

// The vocabulary as constraints read it, built once per model.
class ConstraintVocab {
 public:
  // token_bytes[id]: the bytes token `id` adds; ends: end-of-generation ids.
  ConstraintVocab(std::vector<std::string> token_bytes, std::vector<int32_t> ends);
  // The model's vocabulary as its tokenizer writes it, ending at its
  // end-of-generation ids.
  static std::unique_ptr<ConstraintVocab> of(const Model& model, const Tokenizer& tok);
  std::span<const std::string> bytes() const { return bytes_; }
  std::span<const int32_t> ends() const { return ends_; }
  const TokenTrie& trie() const;  // made on first use (grammars only), over bytes()

 private:
  std::vector<std::string> bytes_;
  std::vector<int32_t> ends_;
  mutable std::unique_ptr<TokenTrie> trie_;
};

// A lead and what may follow it: the answer writes the lead whole (gpt-oss's
// reasoning and channel header), then the exit `choose` picks from the
// lead's text (a tool's arguments after a call header, say).
struct ShapePlan {
  struct Exit {
    std::shared_ptr<const JsonSchema> schema;  // at most one of the two; neither: free text
    std::shared_ptr<const Gbnf> grammar;
  };
  std::shared_ptr<const Gbnf> lead;
  std::vector<Exit> exits;                                   // at least one
  std::function<size_t(std::string_view lead_text)> choose;  // null: the first exit
};

class Constraint {
 public:
  // One of the two (the other null).
  Constraint(std::shared_ptr<const JsonSchema> schema, std::shared_ptr<const Gbnf> grammar);
  // The plan's lead, written first and whole (gpt-oss's reasoning and
  // channel header before its final text), then the exit it chooses: the
  // shape starts once the lead is complete (nothing more may follow it), at
  // a token boundary (a token that runs past the lead's end is refused).
  explicit Constraint(const ShapePlan& plan);

  // False (the state unchanged) if `bytes` cannot continue the answer.
  bool feed(std::string_view bytes);
  // Token `id` (its bytes `bytes`): as feed(bytes), and a grammar's token
  // references (gbnf.h) may take it whole.
  bool feed_token(int32_t id, std::string_view bytes);
  // Nothing may follow the answer.
  bool complete() const;
  // The answer may end here.
  bool can_end() const;
  // Sets logits[id] to -inf for each token that cannot come next; the
  // end-of-generation tokens stay where the answer may end, if `ends_allowed`.
  // Returns how many tokens stay allowed.
  size_t mask(const ConstraintVocab& vocab, std::span<float> logits, bool ends_allowed);
  // The lead is still being written.
  bool in_lead() const { return lead_ != nullptr; }

 private:
  void start(const ShapePlan::Exit& exit);
  void leave_lead_if_done();

  std::unique_ptr<GbnfMatcher> lead_;  // until the lead is complete
  std::string lead_text_;              // what the lead has read (for choose_)
  std::vector<ShapePlan::Exit> exits_;
  std::function<size_t(std::string_view)> choose_;
  std::optional<JsonGrammar> json_;
  std::unique_ptr<GbnfMatcher> gbnf_;  // neither: free text
};

// Where a grammar's token references resolve: `tok`'s vocabulary (`tok`
// must outlive the result and the grammars parsed with it).
GbnfTokens gbnf_tokens(const Tokenizer& tok);

// Samples among the `allowed` tokens left in `masked` (sample(span) -> id)
// and feeds the pick unless it ends generation (is_end(id)). A grammar past
// its caps may refuse at feed what its mask allowed (which parses a cap
// drops depends on the order they were made in): that token is masked and
// another sampled. Returns -1 when none is left.
template <class Sample, class IsEnd>
int32_t sample_and_feed(Constraint& c, const ConstraintVocab& vocab, std::span<float> masked, size_t allowed,
                        Sample&& sample, IsEnd&& is_end) {
  for (; allowed > 0; --allowed) {
    const int32_t tok = sample(std::span<const float>(masked));
    if (is_end(tok) || c.feed_token(tok, vocab.bytes()[static_cast<size_t>(tok)])) return tok;
    masked[static_cast<size_t>(tok)] = -std::numeric_limits<float>::infinity();
  }
  return -1;
}

// One shaped pick from `logits`: masked (into `masked`, scratch) then
// sample_and_feed. While the constraint is in its lead (gpt-oss's free
// reasoning, where nearly every token may come and a mask would step the
// whole vocabulary), the pick from the unmasked logits is tried first and
// kept if it feeds (llama.cpp's grammar sampler checks first too): for plain
// temperature sampling the same distribution, but top-k/top-p/min-p then cut
// the model's distribution, not the allowed tokens'. An end-of-generation
// pick goes the masked way (`ends_allowed`: whether it may end at all).
template <class Sample, class IsEnd>
int32_t sample_shaped(Constraint& c, const ConstraintVocab& vocab, std::span<const float> logits,
                      std::vector<float>& masked, bool ends_allowed, Sample&& sample, IsEnd&& is_end) {
  if (c.in_lead()) {
    const int32_t tok = sample(logits);
    if (tok >= 0 && static_cast<size_t>(tok) < vocab.bytes().size() && !is_end(tok) &&
        c.feed_token(tok, vocab.bytes()[static_cast<size_t>(tok)]))
      return tok;
  }
  masked.assign(logits.begin(), logits.end());
  const size_t allowed = c.mask(vocab, masked, ends_allowed);
  return sample_and_feed(c, vocab, masked, allowed, sample, is_end);
}

}  // namespace ss
