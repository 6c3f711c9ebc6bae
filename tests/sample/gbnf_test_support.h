#pragma once
// What the GBNF tests share: an independent recognizer (the oracle), random
// grammars over a small alphabet (token references optional), texts and
// token sequences those grammars derive, and a test vocabulary.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "sample/gbnf.h"
#include "util/utf8.h"

namespace ss::gbnf_test {

// A token as fed: its id and its bytes ("" for a control token).
struct Tok {
  int32_t id;
  std::string bytes;
};

// ---- The oracle: what rule r derives from point i on, written against the
// flat rule table only, sharing no code with the matcher. Points are the
// places between the characters read; over tokens, a token reference reads
// a whole token from the point it starts at to the point after it, and a
// control token (no bytes) is a step only a reference takes. A rule may
// come back to itself at the same place (`r ::= x r | ` with x able to be
// empty), so both tables are least fixed points: passes over memoized
// approximations until none grows. ----
class Oracle {
 public:
  // Over a text's characters.
  Oracle(const Gbnf& g, const std::string& text) : g_(g) {
    for (size_t i = 0; i < text.size();) cps_.push_back(utf8_next(text, i));
    init();
  }
  // Over tokens of whole characters (or none).
  Oracle(const Gbnf& g, const std::vector<Tok>& tokens) : g_(g) {
    std::vector<std::pair<size_t, int32_t>> starts;
    for (const Tok& t : tokens) {
      starts.emplace_back(cps_.size(), t.id);
      if (t.bytes.empty()) cps_.push_back(kNoChar);
      for (size_t i = 0; i < t.bytes.size();) cps_.push_back(utf8_next(t.bytes, i));
    }
    init();
    for (size_t k = 0; k < starts.size(); ++k)
      tok_[starts[k].first] = {starts[k].second, k + 1 < starts.size() ? starts[k + 1].first : n_};
  }
  bool accepts() {
    settle();
    return has(ends(cell(g_.root(), 0)), n_);
  }
  // The input is the prefix of one the root derives (every rule of the
  // test grammars derives something, so reaching the end is enough).
  bool prefix() {
    settle();
    return viable_[cell(g_.root(), 0)] != 0;
  }

 private:
  static constexpr uint32_t kNoChar = UINT32_MAX;  // a point only a token reference leaves
  using Bits = std::vector<uint64_t>;              // a set of points 0..n
  void init() {
    n_ = cps_.size();
    tok_.assign(n_ + 1, {-1, 0});
    words_ = (n_ + 1 + 63) / 64;
    const size_t cells = g_.rule_count() * (n_ + 1);
    ends_.assign(cells * words_, 0);
    viable_.assign(cells, 0);
    state_.assign(cells, 0);
  }
  size_t cell(uint32_t r, size_t i) const { return r * (n_ + 1) + i; }
  uint64_t* ends(size_t c) { return &ends_[c * words_]; }
  static bool has(const uint64_t* b, size_t j) { return (b[j / 64] >> (j % 64)) & 1; }
  static void add(uint64_t* b, size_t j) { b[j / 64] |= uint64_t{1} << (j % 64); }

  void settle() {
    do {
      changed_ = false;
      ++pass_;
      rule(g_.root(), 0);
    } while (changed_);
  }
  // Recomputes (r, i) once a pass (state_ == pass_: done or in progress,
  // which reads as it stands).
  void rule(uint32_t r, size_t i) {
    const size_t c = cell(r, i);
    if (state_[c] == pass_) return;
    state_[c] = pass_;
    Bits out(ends(c), ends(c) + words_);
    bool v = viable_[c] || i == n_;
    for (const uint32_t a : g_.alternatives(r)) {
      Bits at(words_, 0);
      add(at.data(), i);
      for (uint32_t p = a; g_.elem(p).kind != GbnfElem::Kind::End; ++p) {
        const GbnfElem& e = g_.elem(p);
        Bits next(words_, 0);
        bool any = false;
        for (size_t j = 0; j <= n_; ++j) {
          if (!has(at.data(), j)) continue;
          if (j == n_) v = true;  // the input ends inside this alternative
          if (e.kind == GbnfElem::Kind::Rule) {
            rule(e.value, j);
            const size_t sub = cell(e.value, j);
            v = v || viable_[sub];
            for (size_t w = 0; w < words_; ++w) next[w] |= ends(sub)[w];
          } else if (e.kind == GbnfElem::Kind::Token) {
            const bool same = tok_[j].first >= 0 && static_cast<uint32_t>(tok_[j].first) == e.value;
            if (tok_[j].first >= 0 && same != e.negated) add(next.data(), tok_[j].second);
          } else if (j < n_ && cps_[j] != kNoChar && g_.matches(e, cps_[j])) {
            add(next.data(), j + 1);
          }
        }
        at = std::move(next);
        for (const uint64_t w : at) any = any || w;
        if (!any) break;
      }
      for (size_t w = 0; w < words_; ++w) out[w] |= at[w];
      v = v || has(at.data(), n_);
    }
    if (!std::equal(out.begin(), out.end(), ends(c)) || v != (viable_[c] != 0)) changed_ = true;
    std::copy(out.begin(), out.end(), ends(c));
    viable_[c] = v;
  }

  const Gbnf& g_;
  std::vector<uint32_t> cps_;                    // the character read at each point (kNoChar: none)
  std::vector<std::pair<int32_t, size_t>> tok_;  // per point: the token starting there (-1: none), its end point
  size_t n_ = 0, words_ = 0;
  std::vector<uint64_t> ends_;   // per cell: a Bits of words_ words
  std::vector<uint8_t> viable_;  // per cell
  std::vector<uint32_t> state_;  // per cell: the pass that computed it
  uint32_t pass_ = 0;
  bool changed_ = false;
};

// ---- Random grammars over a small alphabet with multi-byte characters. ----
inline const std::vector<std::string> kAlphabet = {"a", "b", "c", "\xC3\xA9" /* é */, "\xE4\xB8\xAD" /* 中 */, "x"};

class GrammarMaker {
 public:
  // token_refs: token references a symbol may be (none: characters only).
  explicit GrammarMaker(std::mt19937& rng, std::vector<std::string> token_refs = {})
      : rng_(rng), refs_(std::move(token_refs)) {}
  // Rule i's first alternative refers only to later rules, and the last
  // rule's to none: every rule derives some text.
  std::string make() {
    const int rules = 1 + pick(4);
    std::string out;
    for (int i = 0; i < rules; ++i) {
      out += (i == 0 ? std::string("root") : "r" + std::to_string(i)) + " ::= ";
      const int alts = 1 + pick(3);
      for (int a = 0; a < alts; ++a) {
        if (a) out += pick(2) ? " | " : " |\n    ";
        out += sequence(i, rules, a == 0, 0);
      }
      out += pick(3) == 0 ? "  # a comment\n" : "\n";
    }
    return out;
  }

 private:
  int pick(int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng_); }
  std::string symbol(int rule, int rules, bool first, int depth) {
    if (!refs_.empty() && pick(4) == 0) return refs_[static_cast<size_t>(pick(static_cast<int>(refs_.size())))];
    switch (pick(depth < 2 ? 8 : 6)) {
      case 0: {
        std::string lit = "\"";
        for (int k = 1 + pick(2); k > 0; --k) lit += kAlphabet[static_cast<size_t>(pick(5))];
        return lit + "\"";
      }
      case 1:
        return "[ab]";
      case 2:
        return pick(2) ? "[^a]" : "[a-c\xC3\xA9]";
      case 3:
        return ".";
      case 4:
      case 5: {
        const int lo = first ? rule + 1 : 1;
        if (lo >= rules) return "\"" + kAlphabet[static_cast<size_t>(pick(6))] + "\"";
        const int r = lo + pick(rules - lo);
        return "r" + std::to_string(r);
      }
      default: {
        std::string g = "(";
        for (int a = 1 + pick(2); a > 0; --a) g += sequence(rule, rules, first, depth + 1) + (a > 1 ? " | " : "");
        return g + ")";
      }
    }
  }
  std::string sequence(int rule, int rules, bool first, int depth) {
    std::string s;
    for (int k = 1 + pick(3); k > 0; --k) {
      s += symbol(rule, rules, first, depth);
      switch (pick(8)) {
        case 0:
          s += "*";
          break;
        case 1:
          s += "+";
          break;
        case 2:
          s += "?";
          break;
        case 3: {  // one pick a statement: the order of a call's arguments is the compiler's
          const int lo = pick(3);
          const int hi = 2 + pick(2);
          s += "{" + std::to_string(lo) + "," + std::to_string(hi) + "}";
        } break;
        case 4:
          s += "{2}";
          break;
        default:
          break;
      }
      s += " ";
    }
    return s;
  }
  std::mt19937& rng_;
  std::vector<std::string> refs_;
};

// What the grammar derives, by a random derivation that takes each rule's
// shortest way out once deep: characters of kAlphabet, and where a token
// reference stands the token `token_for` picks for it.
class TextMaker {
 public:
  TextMaker(const Gbnf& g, std::mt19937& rng, std::function<Tok(const GbnfElem&)> token_for = nullptr)
      : g_(g), rng_(rng), token_for_(std::move(token_for)), height_(g.rule_count(), 1 << 20) {
    for (bool changed = true; changed;) {
      changed = false;
      for (uint32_t r = 0; r < g.rule_count(); ++r)
        for (const uint32_t a : g.alternatives(r)) {
          const int h = alt_height(a);
          if (h < height_[r]) height_[r] = h, changed = true;
        }
    }
  }
  // A text (false where the grammar needs a token reference or a character
  // outside the alphabet).
  bool make(std::string& out) {
    std::vector<Tok> pieces;
    if (!make(pieces)) return false;
    out.clear();
    for (const Tok& p : pieces) {
      if (p.id >= 0) return false;
      out += p.bytes;
    }
    return true;
  }
  // Pieces: a character (id -1) or a token.
  bool make(std::vector<Tok>& out) {
    out.clear();
    return rule(g_.root(), 0, out);
  }

 private:
  int alt_height(uint32_t a) const {
    int h = 1;
    for (uint32_t p = a; g_.elem(p).kind != GbnfElem::Kind::End; ++p)
      if (g_.elem(p).kind == GbnfElem::Kind::Rule) h = std::max(h, 1 + height_[g_.elem(p).value]);
    return std::min(h, 1 << 20);
  }
  bool rule(uint32_t r, int depth, std::vector<Tok>& out) {
    const auto alts = g_.alternatives(r);
    uint32_t a = alts[std::uniform_int_distribution<size_t>(0, alts.size() - 1)(rng_)];
    if (depth > 6)
      for (const uint32_t b : alts)
        if (alt_height(b) < alt_height(a)) a = b;
    for (uint32_t p = a; g_.elem(p).kind != GbnfElem::Kind::End; ++p) {
      const GbnfElem& e = g_.elem(p);
      if (e.kind == GbnfElem::Kind::Rule) {
        if (!rule(e.value, depth + 1, out)) return false;
        continue;
      }
      if (e.kind == GbnfElem::Kind::Token) {
        if (!token_for_) return false;
        out.push_back(token_for_(e));
        continue;
      }
      std::vector<std::string> fits;
      for (const std::string& c : kAlphabet) {
        size_t i = 0;
        if (g_.matches(e, utf8_next(c, i))) fits.push_back(c);
      }
      if (fits.empty()) return false;
      out.push_back({-1, fits[std::uniform_int_distribution<size_t>(0, fits.size() - 1)(rng_)]});
    }
    return true;
  }
  const Gbnf& g_;
  std::mt19937& rng_;
  std::function<Tok(const GbnfElem&)> token_for_;
  std::vector<int> height_;
};

inline std::string mutate(std::string s, std::mt19937& rng) {
  const auto chars = utf8_chars(s);
  std::vector<std::string> v(chars.begin(), chars.end());
  auto pick = [&](size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng); };
  const size_t what = pick(3);
  if (what == 0 && !v.empty()) v.erase(v.begin() + static_cast<ptrdiff_t>(pick(v.size())));
  if (what == 1) {
    const size_t at = pick(v.size() + 1);
    v.insert(v.begin() + static_cast<ptrdiff_t>(at), kAlphabet[pick(kAlphabet.size())]);
  }
  if (what == 2 && !v.empty()) {
    const size_t at = pick(v.size());
    v[at] = kAlphabet[pick(kAlphabet.size())];
  }
  std::string out;
  for (const auto& c : v) out += c;
  return out;
}

// A vocabulary with multi-character tokens, byte-fallback halves of
// multi-byte characters and a token without bytes (id 0).
inline std::vector<std::string> test_vocab() {
  std::vector<std::string> v = {""};
  for (const auto& a : kAlphabet) {
    v.push_back(a);
    for (const auto& b : kAlphabet) v.push_back(a + b);
  }
  v.push_back("\xC3");
  v.push_back("\xA9");
  v.push_back("\xE4");
  v.push_back("\xB8\xAD");
  v.push_back("\xB8");
  v.push_back("\xFF");
  v.push_back("abc");
  v.push_back(
      "\xA9"
      "a");
  return v;
}

}  // namespace ss::gbnf_test
