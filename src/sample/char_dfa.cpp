#include "sample/char_dfa.h"

#include <algorithm>
#include <map>
#include <string>
#include <utility>

#include "sample/gbnf_matcher.h"
#include "util/utf8.h"

namespace ss {

namespace {

constexpr uint32_t kSurrogates = 0xD800, kAfterSurrogates = 0xE000, kEnd = Gbnf::kMaxCodePoint + 1;

// The first code point of each class of characters no element of g tells
// apart; the surrogates (which no text holds) are a class of their own.
std::vector<uint32_t> class_starts(const Gbnf& g) {
  std::vector<uint32_t> cuts = {0, kSurrogates, kAfterSurrogates};
  for (size_t pos = 0; pos < g.element_count(); ++pos) {
    const GbnfElem& e = g.elem(static_cast<uint32_t>(pos));
    if (e.kind != GbnfElem::Kind::Chars) continue;
    for (const auto& [lo, hi] : g.ranges(e)) {
      cuts.push_back(lo);
      if (hi + 1 < kEnd) cuts.push_back(hi + 1);
    }
  }
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  return cuts;
}

}  // namespace

Result<std::shared_ptr<const CharDfa>> CharDfa::build(std::shared_ptr<const Gbnf> grammar, uint32_t min_chars,
                                                      uint32_t max_chars, const Limits& limits) {
  auto dfa = std::make_shared<CharDfa>();
  dfa->class_start_ = class_starts(*grammar);
  const size_t classes = dfa->class_start_.size();
  const auto too_big = [&] {
    return make_error("the pattern's automaton has more than " + std::to_string(limits.max_states) + " states or " +
                      std::to_string(limits.max_entries) + " transitions (" + std::to_string(classes) +
                      " classes of characters)");
  };
  if (classes > limits.max_entries) return too_big();

  GbnfMatcher m(grammar);
  if (m.dropped_parses()) return make_error("the pattern is too ambiguous to follow exactly");
  // A state is the matcher's state and the characters read, counted up to
  // the most a limit needs told apart (more than max_chars never happens).
  const uint32_t count_cap = max_chars != kNoLimit ? max_chars : min_chars;
  using Key = std::pair<std::vector<uint32_t>, uint32_t>;
  std::map<Key, int32_t> ids;
  std::vector<const Key*> keys;
  auto id_of = [&](Key k) -> int32_t {
    auto [it, fresh] = ids.emplace(std::move(k), static_cast<int32_t>(keys.size()));
    if (fresh) keys.push_back(&it->first);
    return it->second;
  };
  id_of({m.state_key(), 0});
  std::vector<int32_t> next;
  std::vector<uint8_t> accept;
  std::string bytes;
  size_t key_words = 0;  // grammar positions of the states met: their memory, and loading them
  for (size_t s = 0; s < keys.size(); ++s) {
    if (keys.size() > limits.max_states || (s + 1) * classes > limits.max_entries) return too_big();
    const Key& key = *keys[s];
    m.load_state(key.first);
    accept.push_back(m.can_end() && key.second >= min_chars);
    for (size_t c = 0; c < classes; ++c) {
      const uint32_t cp = dfa->class_start_[c];
      if (cp == kSurrogates || key.second == max_chars) {
        next.push_back(kDead);
        continue;
      }
      m.load_state(key.first);
      bytes.clear();
      utf8_append(bytes, cp);
      if (!m.feed(bytes)) {
        next.push_back(kDead);
        continue;
      }
      if (m.dropped_parses()) return make_error("the pattern is too ambiguous to follow exactly");
      key_words += key.first.size();
      if (m.total_expansions() + key_words > limits.max_work)
        return make_error("the pattern takes more than " + std::to_string(limits.max_work) +
                          " steps to turn into an automaton");
      next.push_back(id_of({m.state_key(), std::min(key.second + 1, count_cap)}));
    }
  }

  // Keep the states an accepting one can be reached from.
  const size_t n = keys.size();
  std::vector<std::vector<int32_t>> into(n);
  for (size_t s = 0; s < n; ++s)
    for (size_t c = 0; c < classes; ++c)
      if (const int32_t t = next[s * classes + c]; t != kDead)
        into[static_cast<size_t>(t)].push_back(static_cast<int32_t>(s));
  std::vector<uint8_t> live(accept);
  std::vector<int32_t> todo;
  for (size_t s = 0; s < n; ++s)
    if (live[s]) todo.push_back(static_cast<int32_t>(s));
  while (!todo.empty()) {
    const int32_t t = todo.back();
    todo.pop_back();
    for (const int32_t s : into[static_cast<size_t>(t)])
      if (!live[static_cast<size_t>(s)]) {
        live[static_cast<size_t>(s)] = 1;
        todo.push_back(s);
      }
  }
  if (!live[0]) return make_error("no text of the allowed length matches the pattern");
  std::vector<int32_t> renamed(n, kDead);
  int32_t kept = 0;
  for (size_t s = 0; s < n; ++s)
    if (live[s]) renamed[s] = kept++;
  dfa->build_work_ = m.total_expansions() + key_words;
  dfa->next_.reserve(static_cast<size_t>(kept) * classes);
  for (size_t s = 0; s < n; ++s) {
    if (!live[s]) continue;
    dfa->accept_.push_back(accept[s]);
    for (size_t c = 0; c < classes; ++c) {
      const int32_t t = next[s * classes + c];
      dfa->next_.push_back(t == kDead ? kDead : renamed[static_cast<size_t>(t)]);
    }
  }
  return std::shared_ptr<const CharDfa>(std::move(dfa));
}

size_t CharDfa::class_of(uint32_t cp) const {
  return static_cast<size_t>(std::upper_bound(class_start_.begin(), class_start_.end(), cp) - class_start_.begin()) - 1;
}

bool CharDfa::any_in(int32_t state, uint32_t lo, uint32_t hi) const {
  if (state < 0 || lo >= kEnd) return false;
  const size_t classes = class_start_.size(), row = static_cast<size_t>(state) * classes;
  for (size_t c = class_of(lo); c < classes && class_start_[c] <= hi; ++c)
    if (next_[row + c] != kDead) return true;
  return false;
}

int32_t CharDfa::run(int32_t state, std::string_view text) const {
  for (size_t i = 0; i < text.size() && state != kDead;) state = step(state, utf8_next(text, i));
  return state;
}

int32_t CharDfa::step(int32_t state, uint32_t cp) const {
  if (state < 0 || cp >= kEnd) return kDead;
  return next_[static_cast<size_t>(state) * class_start_.size() + class_of(cp)];
}

}  // namespace ss
