#include "sample/gbnf_matcher.h"

#include <algorithm>
#include <limits>

#include "util/check.h"
#include "util/utf8.h"

namespace ss {

bool GbnfMatcher::SeenSet::insert(uint64_t key) {
  if (2 * (used_ + 1) > keys_.size()) {  // grow, keeping this step's keys
    std::vector<uint64_t> old;
    for (size_t i = 0; i < keys_.size(); ++i)
      if (stamps_[i] == now_) old.push_back(keys_[i]);
    const size_t size = std::max<size_t>(64, 4 * keys_.size());
    keys_.assign(size, 0);
    stamps_.assign(size, 0);
    now_ = 1;
    used_ = 0;
    for (const uint64_t k : old) insert(k);
  }
  const size_t mask = keys_.size() - 1;
  for (size_t i = (key * 0x9E3779B97F4A7C15ull) >> 20 & mask;; i = (i + 1) & mask) {
    if (stamps_[i] != now_) {
      stamps_[i] = now_;
      keys_[i] = key;
      ++used_;
      return true;
    }
    if (keys_[i] == key) return false;
  }
}

void GbnfMatcher::SeenSet::clear() {
  used_ = 0;
  if (++now_ == 0) {  // stamps wrapped: forget them all
    std::fill(stamps_.begin(), stamps_.end(), 0);
    now_ = 1;
  }
}

GbnfMatcher::GbnfMatcher(std::shared_ptr<const Gbnf> grammar, const Limits& limits)
    : g_(std::move(grammar)), limits_(limits) {
  seen_.clear();
  for (const uint32_t a : g_->alternatives(g_->root())) expand(a, nullptr, cur_);
  dropped_ = distinct(cur_.heads) || expansions_ > limits_.max_expansions;
}

const GbnfMatcher::Node* GbnfMatcher::intern(uint32_t pos, const Node* next) {
  // Positions fit 20 bits (Gbnf::kMaxElements); ids take the rest.
  static_assert(Gbnf::kMaxElements <= (1u << 20));
  const uint64_t key = ((next ? next->id + 1 : 0) << 20) | pos;
  if (auto it = base_.index.find(key); it != base_.index.end()) return it->second;
  Table& t = in_mask_ ? scratch_ : base_;
  if (in_mask_)
    if (auto it = t.index.find(key); it != t.index.end()) return it->second;
  const Node* n = &t.nodes.emplace_back(Node{pos, next_id_++, next});
  t.index.emplace(key, n);
  return n;
}

void GbnfMatcher::expand(uint32_t pos, const Node* next, State& to) {
  work_.clear();
  work_.emplace_back(pos, next);
  while (!work_.empty()) {
    mask_work_ += in_mask_;
    ++total_expansions_;
    if (++expansions_ > limits_.max_expansions) {
      if (!in_mask_) dropped_ = true;
      return;
    }
    auto [p, n] = work_.back();
    work_.pop_back();
    // A stack met before in this step: from here on it goes where it went
    // then (a loop through rules that may be empty comes back to it).
    if (!seen_.insert((static_cast<uint64_t>(n ? n->id + 1 : 0) << 20) | p)) continue;
    const GbnfElem& e = g_->elem(p);
    switch (e.kind) {
      case GbnfElem::Kind::End:
        if (n)
          work_.emplace_back(n->pos, n->next);
        else
          to.accepted = true;
        break;
      case GbnfElem::Kind::Rule: {
        // Nothing to come back to when the reference ends its alternative.
        const Node* cont = g_->elem(p + 1).kind == GbnfElem::Kind::End ? n : intern(p + 1, n);
        const auto alts = g_->alternatives(e.value);
        for (auto it = alts.rbegin(); it != alts.rend(); ++it) work_.emplace_back(*it, cont);
        break;
      }
      default:
        to.heads.push_back(intern(p, n));
        break;
    }
  }
}

void GbnfMatcher::advance(const State& from, uint32_t cp, State& to) {
  to.heads.clear();
  to.accepted = false;
  to.left = 0;
  expansions_ = 0;
  seen_.clear();
  for (const Node* h : from.heads) {
    const uint32_t pos = h->pos;
    if (!g_->matches(g_->elem(pos), cp)) continue;
    // After the character: the next element of its alternative (an End pops).
    expand(pos + 1, h->next, to);
  }
  if (distinct(to.heads) && !in_mask_) dropped_ = true;
}

// Sorted by id, not address, so which parses a cap drops is the same on every run.
bool GbnfMatcher::distinct(std::vector<const Node*>& heads) const {
  std::sort(heads.begin(), heads.end(), [](const Node* a, const Node* b) { return a->id < b->id; });
  heads.erase(std::unique(heads.begin(), heads.end()), heads.end());
  if (heads.size() <= limits_.max_heads) return false;
  heads.resize(limits_.max_heads);
  return true;
}

bool GbnfMatcher::viable(const State& s) const {
  if (s.left == 0) return !s.heads.empty() || s.accepted;
  // Characters the partial one can still become: [lo, hi].
  const auto [lo, hi] = utf8_partial_range(s.cp, s.left, s.lo, s.hi);
  for (const Node* h : s.heads)
    if (g_->may_match(g_->elem(h->pos), lo, hi)) return true;
  return false;
}

bool GbnfMatcher::step(const State& from, uint8_t b, State& to) {
  if (from.left == 0 && b < 0x80) {
    advance(from, b, to);
    return viable(to);
  }
  uint32_t cp = 0;
  uint8_t left = 0, lo = 0x80, hi = 0xBF;
  if (from.left == 0) {
    const Utf8Lead lead = utf8_lead(b);
    if (lead.follow < 1) return false;
    cp = lead.bits, left = static_cast<uint8_t>(lead.follow), lo = lead.lo, hi = lead.hi;
  } else {
    if (b < from.lo || b > from.hi) return false;
    cp = (from.cp << 6) | (b & 0x3Fu);
    left = static_cast<uint8_t>(from.left - 1);
    if (left == 0) {
      advance(from, cp, to);
      return viable(to);
    }
  }
  to.heads = from.heads;
  to.accepted = false;
  to.cp = cp;
  to.left = left;
  to.lo = lo;
  to.hi = hi;
  return viable(to);
}

// Parses whose next element is a token reference that takes `id`, each
// moved past it. A token read whole leaves no character partly read.
bool GbnfMatcher::token_step(const State& from, int32_t id, State& to) {
  to = State{};
  if (from.left != 0) return false;
  expansions_ = 0;
  seen_.clear();
  for (const Node* h : from.heads)
    if (token_matches(g_->elem(h->pos), id)) expand(h->pos + 1, h->next, to);
  if (distinct(to.heads) && !in_mask_) dropped_ = true;
  return !to.heads.empty() || to.accepted;
}

void GbnfMatcher::allow_referenced(size_t vocab_size, std::vector<char>& allow) const {
  if (cur_.left != 0) return;
  bool any_other = false;  // a !<...>: every token but the excluded one
  int64_t excluded = -1;   // the one token every !<...> refuses (-1: none)
  for (const Node* h : cur_.heads) {
    const GbnfElem& e = g_->elem(h->pos);
    if (e.kind != GbnfElem::Kind::Token) continue;
    if (!e.negated) {
      if (e.value < vocab_size) allow[e.value] = 1;
    } else if (!any_other) {
      any_other = true;
      excluded = e.value;
    } else if (excluded != static_cast<int64_t>(e.value)) {
      excluded = -1;  // two refuse different tokens: together they take all
    }
  }
  if (!any_other) return;
  for (size_t id = 0; id < vocab_size; ++id)
    if (static_cast<int64_t>(id) != excluded) allow[id] = 1;
}

std::vector<uint32_t> GbnfMatcher::state_key() const {
  SS_CHECK(cur_.left == 0);
  std::vector<std::vector<uint32_t>> stacks;
  for (const Node* h : cur_.heads) {
    std::vector<uint32_t>& s = stacks.emplace_back();
    for (const Node* n = h; n; n = n->next) s.push_back(n->pos);
  }
  std::sort(stacks.begin(), stacks.end());
  std::vector<uint32_t> key;
  for (const std::vector<uint32_t>& s : stacks) {
    key.push_back(static_cast<uint32_t>(s.size()));
    key.insert(key.end(), s.begin(), s.end());
  }
  key.push_back(cur_.accepted ? 1 : 0);
  return key;
}

void GbnfMatcher::load_state(std::span<const uint32_t> key) {
  SS_CHECK(!key.empty());
  cur_ = State{};
  cur_.accepted = key.back() != 0;
  for (size_t i = 0; i + 1 < key.size();) {
    const size_t n = key[i++];
    SS_CHECK(n > 0 && i + n < key.size());
    for (size_t k = 0; k < n; ++k) SS_CHECK(key[i + k] < g_->element_count());
    const Node* top = nullptr;
    for (size_t k = n; k-- > 0;) top = intern(key[i + k], top);
    cur_.heads.push_back(top);
    i += n;
  }
  distinct(cur_.heads);
  dropped_ = false;
}

bool GbnfMatcher::feed(std::string_view bytes) {
  State a = cur_, b;
  for (const char c : bytes) {
    if (!step(a, static_cast<uint8_t>(c), b)) return false;
    std::swap(a, b);
  }
  cur_ = std::move(a);
  if (base_.nodes.size() > compact_at_) compact();
  return true;
}

bool GbnfMatcher::feed_token(int32_t id, std::string_view bytes) {
  State by_token;
  const bool token_ok = token_step(cur_, id, by_token);
  State a = cur_, b;
  bool chars_ok = !bytes.empty();
  for (size_t i = 0; i < bytes.size() && chars_ok; ++i) {
    chars_ok = step(a, static_cast<uint8_t>(bytes[i]), b);
    std::swap(a, b);
  }
  if (!token_ok && !chars_ok) return false;
  if (!chars_ok) {
    cur_ = std::move(by_token);
  } else if (token_ok && a.left != 0) {
    cur_ = std::move(a);
    dropped_ = true;
  } else {
    if (token_ok) {
      a.heads.insert(a.heads.end(), by_token.heads.begin(), by_token.heads.end());
      a.accepted = a.accepted || by_token.accepted;
      if (distinct(a.heads)) dropped_ = true;
    }
    cur_ = std::move(a);
  }
  if (base_.nodes.size() > compact_at_) compact();
  return true;
}

// Rebuilds the node table from the stacks still open: a long answer leaves
// behind the nodes of every parse it closed.
void GbnfMatcher::compact() {
  Table old = std::move(base_);
  base_ = Table{};
  std::unordered_map<const Node*, const Node*> moved{{nullptr, nullptr}};
  std::vector<const Node*> chain;
  for (const Node*& h : cur_.heads) {
    chain.clear();
    for (const Node* n = h; !moved.count(n); n = n->next) chain.push_back(n);
    for (auto it = chain.rbegin(); it != chain.rend(); ++it) moved[*it] = intern((*it)->pos, moved[(*it)->next]);
    h = moved[h];
  }
  distinct(cur_.heads);
  // Deep stacks may be most of the table: room to grow before the next rebuild.
  compact_at_ = std::max(kCompactAt, 4 * base_.nodes.size());
}

void GbnfMatcher::visit(const TokenTrie& trie, const TokenTrie::Node& n, size_t depth, std::vector<char>& allow) {
  const State& from = depth_states_[depth];
  State& to = depth_states_[depth + 1];
  for (uint32_t e = n.edge_begin; e < n.edge_end; ++e) {
    if (mask_work_ > limits_.max_mask_expansions) return;
    if (!step(from, trie.edge_byte(e), to)) continue;
    const TokenTrie::Node& child = trie.node(trie.edge_child(e));
    for (const int32_t id : trie.tokens(child)) allow[static_cast<size_t>(id)] = 1;
    if (child.edge_begin != child.edge_end) visit(trie, child, depth + 1, allow);
  }
}

// The likeliest tokens the cut walk did not reach, each stepped alone,
// until `rescued` of them may come next (or 16 times as many were tried).
void GbnfMatcher::rescue(const TokenTrie& trie, std::span<const float> logits, std::vector<char>& allow) {
  std::vector<int32_t> ids;
  for (size_t id = 0; id < trie.vocab_size() && id < logits.size(); ++id)
    if (!allow[id] && !trie.bytes(id).empty() && logits[id] > -std::numeric_limits<float>::infinity())
      ids.push_back(static_cast<int32_t>(id));
  const size_t tries = std::min(ids.size(), 16 * limits_.rescued);
  std::partial_sort(ids.begin(), ids.begin() + static_cast<ptrdiff_t>(tries), ids.end(), [&](int32_t a, int32_t b) {
    return logits[static_cast<size_t>(a)] > logits[static_cast<size_t>(b)];
  });
  State a, b;
  size_t found = 0;
  for (size_t k = 0; k < tries && found < limits_.rescued; ++k) {
    const std::string& bytes = trie.bytes(static_cast<size_t>(ids[k]));
    a = cur_;
    bool ok = true;
    for (size_t i = 0; i < bytes.size() && ok; ++i) {
      ok = step(a, static_cast<uint8_t>(bytes[i]), b);
      std::swap(a, b);
    }
    allow[static_cast<size_t>(ids[k])] = ok;
    found += ok;
  }
}

size_t GbnfMatcher::mask(const TokenTrie& trie, std::span<float> logits, std::span<const int32_t> ends) {
  std::vector<char> allow(logits.size() > trie.vocab_size() ? logits.size() : trie.vocab_size(), 0);
  if (depth_states_.size() < trie.max_depth() + 2) depth_states_.resize(trie.max_depth() + 2);
  depth_states_[0] = cur_;
  in_mask_ = true;
  mask_work_ = 0;
  visit(trie, trie.root(), 0, allow);
  mask_cut_ = mask_work_ > limits_.max_mask_expansions;
  if (mask_cut_) rescue(trie, logits, allow);
  in_mask_ = false;
  scratch_ = Table{};
  // Token references never take an end-of-generation token.
  std::vector<char> ends_by_bytes;
  for (const int32_t id : ends)
    ends_by_bytes.push_back(id >= 0 && static_cast<size_t>(id) < allow.size() && allow[static_cast<size_t>(id)]);
  allow_referenced(trie.vocab_size(), allow);
  for (size_t k = 0; k < ends.size(); ++k)
    if (ends[k] >= 0 && static_cast<size_t>(ends[k]) < allow.size())
      allow[static_cast<size_t>(ends[k])] = ends_by_bytes[k] || can_end();
  size_t allowed = 0;
  for (size_t id = 0; id < logits.size(); ++id) {
    if (allow[id])
      ++allowed;
    else
      logits[id] = -std::numeric_limits<float>::infinity();
  }
  return allowed;
}

}  // namespace ss
