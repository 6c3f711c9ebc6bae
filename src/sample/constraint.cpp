#include "sample/constraint.h"

#include "util/check.h"

namespace ss {

ConstraintVocab::ConstraintVocab(std::vector<std::string> token_bytes, std::vector<int32_t> ends)
    : bytes_(std::move(token_bytes)), ends_(std::move(ends)) {}

std::unique_ptr<ConstraintVocab> ConstraintVocab::of(const Model& model, const Tokenizer& tok) {
  std::vector<std::string> bytes;
  bytes.reserve(static_cast<size_t>(model.config.n_vocab));
  for (int32_t id = 0; id < model.config.n_vocab; ++id) bytes.push_back(tok.token_bytes(id));
  return std::make_unique<ConstraintVocab>(std::move(bytes), model.vocab.eog_ids());
}

GbnfTokens gbnf_tokens(const Tokenizer& tok) {
  GbnfTokens out;
  out.vocab_size = tok.vocab().size();
  out.token_of = [&tok](std::string_view text) -> std::optional<int32_t> {
    const std::vector<int32_t> ids = tok.encode(text, /*add_bos=*/false, /*parse_special=*/true);
    if (ids.size() != 1) return std::nullopt;
    return ids[0];
  };
  out.ends = tok.vocab().eog_ids();
  return out;
}

const TokenTrie& ConstraintVocab::trie() const {
  if (!trie_) trie_ = std::make_unique<TokenTrie>(bytes_);
  return *trie_;
}

Constraint::Constraint(std::shared_ptr<const JsonSchema> schema, std::shared_ptr<const Gbnf> grammar) {
  SS_CHECK((schema == nullptr) != (grammar == nullptr));
  start({std::move(schema), std::move(grammar)});
}

Constraint::Constraint(const ShapePlan& plan) : exits_(plan.exits), choose_(plan.choose) {
  SS_CHECK(plan.lead && !plan.exits.empty());
  lead_ = std::make_unique<GbnfMatcher>(plan.lead);
  leave_lead_if_done();
}

void Constraint::start(const ShapePlan::Exit& exit) {
  SS_CHECK(!(exit.schema && exit.grammar));
  if (exit.schema) json_.emplace(exit.schema);
  if (exit.grammar) gbnf_ = std::make_unique<GbnfMatcher>(exit.grammar);
}

void Constraint::leave_lead_if_done() {
  if (!lead_ || !lead_->complete()) return;
  lead_.reset();
  const size_t k = choose_ ? choose_(lead_text_) : 0;
  SS_CHECK(k < exits_.size());
  start(exits_[k]);
  lead_text_.clear();
}

bool Constraint::feed(std::string_view bytes) {
  if (lead_) {
    if (!lead_->feed(bytes)) return false;
    lead_text_.append(bytes);
    leave_lead_if_done();
    return true;
  }
  if (json_) return json_->feed(bytes);
  return gbnf_ ? gbnf_->feed(bytes) : true;
}
bool Constraint::feed_token(int32_t id, std::string_view bytes) {
  if (lead_) {
    if (!lead_->feed_token(id, bytes)) return false;
    lead_text_.append(bytes);
    leave_lead_if_done();
    return true;
  }
  if (json_) return json_->feed(bytes);
  return gbnf_ ? gbnf_->feed_token(id, bytes) : true;
}
bool Constraint::complete() const {
  if (lead_) return false;
  if (json_) return json_->complete();
  return gbnf_ && gbnf_->complete();
}
bool Constraint::can_end() const {
  if (lead_) return false;
  if (json_) return json_->can_end();
  return !gbnf_ || gbnf_->can_end();
}

size_t Constraint::mask(const ConstraintVocab& vocab, std::span<float> logits, bool ends_allowed) {
  if (lead_) return lead_->mask(vocab.trie(), logits, {});
  const std::span<const int32_t> ends = ends_allowed ? vocab.ends() : std::span<const int32_t>();
  if (json_) return json_->mask(vocab.bytes(), logits, ends);
  if (gbnf_) return gbnf_->mask(vocab.trie(), logits, ends);
  // Free text: every token, the ends where they may come.
  if (!ends_allowed)
    for (const int32_t e : vocab.ends())
      if (e >= 0 && static_cast<size_t>(e) < logits.size())
        logits[static_cast<size_t>(e)] = -std::numeric_limits<float>::infinity();
  size_t allowed = 0;
  for (const float l : logits) allowed += l != -std::numeric_limits<float>::infinity();
  return allowed;
}

}  // namespace ss
