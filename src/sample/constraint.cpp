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

Constraint::Constraint(std::shared_ptr<const JsonSchema> schema, std::shared_ptr<const Gbnf> grammar,
                       std::shared_ptr<const Gbnf> lead) {
  SS_CHECK((schema == nullptr) != (grammar == nullptr));
  if (schema)
    json_.emplace(std::move(schema));
  else
    gbnf_ = std::make_unique<GbnfMatcher>(std::move(grammar));
  if (lead) lead_ = std::make_unique<GbnfMatcher>(std::move(lead));
  leave_lead_if_done();
}

void Constraint::leave_lead_if_done() {
  if (lead_ && lead_->complete()) lead_.reset();
}

bool Constraint::feed(std::string_view bytes) {
  if (lead_) {
    if (!lead_->feed(bytes)) return false;
    leave_lead_if_done();
    return true;
  }
  return json_ ? json_->feed(bytes) : gbnf_->feed(bytes);
}
bool Constraint::feed_token(int32_t id, std::string_view bytes) {
  if (lead_) {
    if (!lead_->feed_token(id, bytes)) return false;
    leave_lead_if_done();
    return true;
  }
  return json_ ? json_->feed(bytes) : gbnf_->feed_token(id, bytes);
}
bool Constraint::complete() const { return !lead_ && (json_ ? json_->complete() : gbnf_->complete()); }
bool Constraint::can_end() const { return !lead_ && (json_ ? json_->can_end() : gbnf_->can_end()); }

size_t Constraint::mask(const ConstraintVocab& vocab, std::span<float> logits, bool ends_allowed) {
  if (lead_) return lead_->mask(vocab.trie(), logits, {});
  const std::span<const int32_t> ends = ends_allowed ? vocab.ends() : std::span<const int32_t>();
  return json_ ? json_->mask(vocab.bytes(), logits, ends) : gbnf_->mask(vocab.trie(), logits, ends);
}

}  // namespace ss
