#include "sample/gbnf.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <unordered_map>

#include "util/hex.h"
#include "util/utf8.h"

namespace ss {

namespace {

struct PElem {  // an element while parsing: ranges not yet in the shared table
  GbnfElem::Kind kind = GbnfElem::Kind::Chars;
  bool negated = false;
  uint32_t rule = 0;
  std::vector<std::pair<uint32_t, uint32_t>> ranges;
};
using PAlt = std::vector<PElem>;
struct PRule {
  std::string name;
  std::vector<PAlt> alts;
  bool defined = false;
  size_t first_use = 0;  // offset of the first reference, for "undefined" messages
};

bool is_word_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
}
bool is_digit(char c) { return c >= '0' && c <= '9'; }

}  // namespace

class GbnfParser {
 public:
  GbnfParser(std::string_view s, const GbnfTokens* tokens) : s_(s), tokens_(tokens) {}

  Result<std::shared_ptr<const Gbnf>> run() {
    if (s_.size() > Gbnf::kMaxTextBytes)
      return make_error("grammar: longer than " + std::to_string(Gbnf::kMaxTextBytes) + " bytes");
    space(true);
    while (!end())
      if (!rule()) return make_error("grammar: " + err_);
    if (!finish()) return make_error("grammar: " + err_);
    return std::shared_ptr<const Gbnf>(std::move(g_));
  }

 private:
  bool end() const { return p_ >= s_.size(); }
  char at(size_t k = 0) const { return p_ + k < s_.size() ? s_[p_ + k] : '\0'; }

  std::string where(size_t off) const {
    size_t line = 1, col = 1;
    for (size_t i = 0; i < off && i < s_.size(); ++i) {
      if (s_[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    return "line " + std::to_string(line) + ", column " + std::to_string(col);
  }
  bool fail(const std::string& msg) { return fail_at(p_, msg); }
  bool fail_at(size_t off, const std::string& msg) {
    if (err_.empty()) err_ = msg + " (" + where(off) + ")";
    return false;
  }

  void space(bool newline_ok) {
    while (!end()) {
      const char c = at();
      if (c == '#') {
        while (!end() && at() != '\n' && at() != '\r') ++p_;
      } else if (c == ' ' || c == '\t' || (newline_ok && (c == '\n' || c == '\r'))) {
        ++p_;
      } else {
        break;
      }
    }
  }

  bool name(std::string& out) {
    const size_t b = p_;
    while (!end() && is_word_char(at())) ++p_;
    if (p_ == b) return fail("expected a rule name");
    out.assign(s_.substr(b, p_ - b));
    return true;
  }

  uint32_t rule_id(const std::string& n, size_t use) {
    auto [it, fresh] = ids_.emplace(n, static_cast<uint32_t>(rules_.size()));
    if (fresh) {
      rules_.emplace_back();
      rules_.back().name = n;
      rules_.back().first_use = use;
    }
    return it->second;
  }
  uint32_t new_rule(const std::string& base) {
    std::string n;
    do n = base + "_" + std::to_string(++generated_);
    while (ids_.count(n));
    const uint32_t id = rule_id(n, p_);
    rules_[id].defined = true;
    return id;
  }

  bool hex(int digits, uint32_t& cp) {
    if (!read_hex(s_, p_, digits, cp)) return fail("expected " + std::to_string(digits) + " hex digits");
    return true;
  }

  // One character of a literal or class: an escape or a UTF-8 character.
  bool character(uint32_t& cp) {
    if (end()) return fail("unexpected end of the grammar");
    const size_t start = p_;
    const auto c = static_cast<unsigned char>(at());
    if (c == '\\') {
      ++p_;
      const char e = at();
      ++p_;
      switch (e) {
        case 'x':
          if (!hex(2, cp)) return false;
          break;
        case 'u':
          if (!hex(4, cp)) return false;
          break;
        case 'U':
          if (!hex(8, cp)) return false;
          break;
        case 't':
          cp = '\t';
          break;
        case 'r':
          cp = '\r';
          break;
        case 'n':
          cp = '\n';
          break;
        case '\\':
        case '"':
        case '[':
        case ']':
          cp = static_cast<uint32_t>(e);
          break;
        default:
          return fail_at(start, "unknown escape");
      }
      if (cp > Gbnf::kMaxCodePoint) return fail_at(start, "escape past U+10FFFF");
      return true;
    }
    // UTF-8, RFC 3629 (no overlong forms, surrogates or code points past U+10FFFF).
    const Utf8Lead lead = utf8_lead(c);
    if (lead.follow < 0) return fail("invalid UTF-8");
    cp = lead.bits;
    ++p_;
    for (int i = 0; i < lead.follow; ++i, ++p_) {
      const auto d = static_cast<unsigned char>(at());
      const bool in_range = i == 0 ? d >= lead.lo && d <= lead.hi : (d & 0xC0) == 0x80;
      if (end() || !in_range) return fail_at(start, "invalid UTF-8");
      cp = (cp << 6) | (d & 0x3F);
    }
    return true;
  }

  bool count(size_t n) {
    elements_ += n;
    if (elements_ > Gbnf::kMaxElements)
      return fail("the grammar has more than " + std::to_string(Gbnf::kMaxElements) +
                  " elements once repetitions are written out");
    return true;
  }

  bool rule() {
    const size_t start = p_;
    std::string n;
    if (!name(n)) return false;
    space(false);
    if (s_.substr(p_, 3) != "::=") return fail("expected '::='");
    p_ += 3;
    space(true);
    const uint32_t id = rule_id(n, start);
    if (rules_[id].defined) return fail_at(start, "rule '" + n + "' is defined twice");
    rules_[id].defined = true;
    if (!alternates(id, n, false, 0)) return false;
    if (at() == '\r') {
      p_ += at(1) == '\n' ? 2 : 1;
    } else if (at() == '\n') {
      ++p_;
    } else if (!end()) {
      return fail("expected the end of the rule (a newline)");
    }
    space(true);
    return true;
  }

  bool alternates(uint32_t id, const std::string& rule_name, bool nested, int depth) {
    std::vector<PAlt> alts(1);
    if (!sequence(alts.back(), rule_name, nested, depth)) return false;
    while (at() == '|') {
      ++p_;
      space(true);
      alts.emplace_back();
      if (!sequence(alts.back(), rule_name, nested, depth)) return false;
    }
    if (!count(alts.size())) return false;  // their ends
    rules_[id].alts = std::move(alts);
    return true;
  }

  bool sequence(PAlt& alt, const std::string& rule_name, bool nested, int depth) {
    size_t last = alt.size();  // where the last symbol starts (a literal is one symbol)
    while (!end()) {
      const char c = at();
      const size_t start = p_;
      if (c == '"') {
        ++p_;
        last = alt.size();
        while (at() != '"') {
          uint32_t cp = 0;
          if (!character(cp)) return false;
          PElem e;
          e.ranges.emplace_back(cp, cp);
          alt.push_back(std::move(e));
          if (!count(1)) return false;
        }
        ++p_;
      } else if (c == '[') {
        ++p_;
        PElem e;
        if (at() == '^') {
          e.negated = true;
          ++p_;
        }
        while (at() != ']') {
          uint32_t lo = 0, hi = 0;
          if (!character(lo)) return false;
          hi = lo;
          if (at() == '-' && at(1) != ']' && p_ + 1 < s_.size()) {
            ++p_;
            if (!character(hi)) return false;
            if (hi < lo) return fail_at(start, "a range ends before it starts");
          }
          e.ranges.emplace_back(lo, hi);
        }
        ++p_;
        last = alt.size();
        alt.push_back(std::move(e));
        if (!count(1)) return false;
      } else if (c == '<' || c == '!') {
        PElem e;
        if (!token(e)) return false;
        last = alt.size();
        alt.push_back(std::move(e));
        if (!count(1)) return false;
      } else if (is_word_char(c)) {
        std::string n;
        if (!name(n)) return false;
        PElem e;
        e.kind = GbnfElem::Kind::Rule;
        e.rule = rule_id(n, start);
        last = alt.size();
        alt.push_back(std::move(e));
        if (!count(1)) return false;
      } else if (c == '(') {
        if (depth + 1 > Gbnf::kMaxNesting)
          return fail("parentheses nest deeper than " + std::to_string(Gbnf::kMaxNesting));
        ++p_;
        space(true);
        const uint32_t sub = new_rule(rule_name);
        if (!alternates(sub, rule_name, true, depth + 1)) return false;
        if (at() != ')') return fail("expected ')'");
        ++p_;
        PElem e;
        e.kind = GbnfElem::Kind::Rule;
        e.rule = sub;
        last = alt.size();
        alt.push_back(std::move(e));
        if (!count(1)) return false;
      } else if (c == '.') {
        ++p_;
        PElem e;
        e.kind = GbnfElem::Kind::Any;
        last = alt.size();
        alt.push_back(std::move(e));
        if (!count(1)) return false;
      } else if (c == '*' || c == '+' || c == '?' || c == '{') {
        uint64_t lo = 0, hi = UINT64_MAX;
        ++p_;
        if (c == '+') lo = 1;
        if (c == '?') hi = 1;
        if (c == '{' && !bounds(lo, hi)) return false;
        if (last == alt.size()) return fail_at(start, "a repetition follows nothing");
        // alt[last..] is now what the repetition wrote: a second one repeats
        // all of it (x{2}{3} is (x x){3}), as in llama.cpp.
        if (!repeat(alt, last, lo, hi, rule_name)) return false;
      } else {
        break;
      }
      space(nested);
    }
    return true;
  }

  // `<[id]>`, `<text>`, or either after `!` (any other token).
  bool token(PElem& e) {
    const size_t start = p_;
    e.kind = GbnfElem::Kind::Token;
    if (at() == '!') {
      e.negated = true;
      ++p_;
    }
    if (at() != '<') return fail("expected '<' (a token reference)");
    const size_t open = p_;
    const size_t close = s_.find('>', open);
    if (close == std::string_view::npos) return fail("a token reference without '>'");
    p_ = close + 1;
    if (!tokens_) return fail_at(start, "token references (<...>, !<...>) need the model's vocabulary");
    const std::string_view inner = s_.substr(open + 1, close - open - 1);
    if (!inner.empty() && inner.front() == '[' && inner.back() == ']') {
      const std::string_view digits = inner.substr(1, inner.size() - 2);
      uint64_t id = 0;
      bool ok = !digits.empty() && digits.size() <= 10;
      for (const char d : digits) {
        ok = ok && is_digit(d);
        id = id * 10 + static_cast<uint64_t>(d - '0');
      }
      if (!ok) return fail_at(open, "expected a token id in <[...]>");
      if (id >= static_cast<uint64_t>(tokens_->vocab_size))
        return fail_at(open, "token id " + std::string(digits) + " is past the vocabulary (" +
                                 std::to_string(tokens_->vocab_size) + " tokens)");
      e.rule = static_cast<uint32_t>(id);
    } else {
      const std::string_view text = s_.substr(open, close + 1 - open);
      const std::optional<int32_t> id = tokens_->token_of ? tokens_->token_of(text) : std::nullopt;
      if (!id || *id < 0 || *id >= tokens_->vocab_size)
        return fail_at(open, "'" + std::string(text) + "' is not one token of the vocabulary");
      e.rule = static_cast<uint32_t>(*id);
    }
    const auto& ends = tokens_->ends;
    if (!e.negated && std::find(ends.begin(), ends.end(), static_cast<int32_t>(e.rule)) != ends.end())
      return fail_at(open, "token " + std::to_string(e.rule) +
                               " ends generation: the answer ends where the grammar may end, so no rule reads it");
    return true;
  }

  bool integer(uint64_t& v) {
    if (!is_digit(at())) return fail("expected a number");
    v = 0;
    while (is_digit(at())) {
      v = v * 10 + static_cast<uint64_t>(at() - '0');
      ++p_;
      if (v > Gbnf::kMaxRepetitions) return fail("more than " + std::to_string(Gbnf::kMaxRepetitions) + " repetitions");
    }
    return true;
  }

  bool bounds(uint64_t& lo, uint64_t& hi) {
    space(true);
    if (!integer(lo)) return false;
    space(true);
    if (at() == '}') {
      hi = lo;
    } else if (at() == ',') {
      ++p_;
      space(true);
      if (is_digit(at()) && !integer(hi)) return false;
      space(true);
      if (at() != '}') return fail("expected '}'");
      if (hi < lo) return fail("a repetition's most is under its least");
    } else {
      return fail("expected ',' or '}'");
    }
    ++p_;
    return true;
  }

  // alt[last..] is S; S{lo,hi} becomes S (lo times) then hi - lo nested
  // optional rules (S'(k) ::= S S'(k-1) | ), or one S' ::= S S' | when
  // unbounded: llama.cpp's rewrite.
  bool repeat(PAlt& alt, size_t last, uint64_t lo, uint64_t hi, const std::string& rule_name) {
    const PAlt s(alt.begin() + static_cast<ptrdiff_t>(last), alt.end());
    alt.resize(last);
    if (lo == 0)
      elements_ -= s.size();  // S was counted when it was read
    else if (!count((lo - 1) * s.size()))
      return false;
    for (uint64_t i = 0; i < lo; ++i) alt.insert(alt.end(), s.begin(), s.end());
    if (hi == lo) return true;
    const bool unbounded = hi == UINT64_MAX;
    const uint64_t optional = unbounded ? 1 : hi - lo;
    uint32_t inner = 0;
    for (uint64_t k = 0; k < optional; ++k) {
      const uint32_t id = new_rule(rule_name);
      PAlt body = s;
      if (unbounded || k > 0) {
        PElem ref;
        ref.kind = GbnfElem::Kind::Rule;
        ref.rule = unbounded ? id : inner;
        body.push_back(std::move(ref));
      }
      if (!count(body.size() + 2)) return false;  // and two ends
      rules_[id].alts = {std::move(body), PAlt{}};
      inner = id;
    }
    PElem ref;
    ref.kind = GbnfElem::Kind::Rule;
    ref.rule = inner;
    alt.push_back(std::move(ref));
    return count(1);
  }

  bool finish() {
    for (const PRule& r : rules_)
      if (!r.defined) return fail_at(r.first_use, "rule '" + r.name + "' is used but not defined");
    const auto root = ids_.find("root");
    if (root == ids_.end()) return fail_at(0, "no 'root' rule");
    if (!left_recursion_free()) return false;

    g_ = std::make_shared<Gbnf>();
    g_->root_ = root->second;
    g_->rule_alts_.resize(rules_.size());
    for (size_t r = 0; r < rules_.size(); ++r) {
      g_->names_.push_back(rules_[r].name);
      for (const PAlt& a : rules_[r].alts) {
        g_->rule_alts_[r].push_back(static_cast<uint32_t>(g_->elems_.size()));
        for (const PElem& e : a) {
          GbnfElem out;
          out.kind = e.kind;
          out.negated = e.negated;
          out.value = e.rule;
          if (e.kind == GbnfElem::Kind::Chars) {
            auto rs = e.ranges;
            std::sort(rs.begin(), rs.end());
            out.value = static_cast<uint32_t>(g_->ranges_.size());
            for (const auto& x : rs) {
              if (g_->ranges_.size() > out.value && x.first <= g_->ranges_.back().second + 1)
                g_->ranges_.back().second = std::max(g_->ranges_.back().second, x.second);
              else
                g_->ranges_.push_back(x);
            }
            out.count = static_cast<uint32_t>(g_->ranges_.size() - out.value);
          }
          g_->elems_.push_back(out);
        }
        g_->elems_.push_back(GbnfElem{});
      }
    }
    return true;
  }

  // Rules that may match the empty text, then a search for a rule that can
  // reach itself without reading a character (the matcher would expand it
  // for ever). Both linear in the grammar: an attacker's chain of 100k
  // rules costs no recursion.
  bool left_recursion_free() {
    const size_t n = rules_.size();
    std::vector<char> nullable(n, 0);
    struct Use {
      uint32_t rule, alt;
    };
    std::vector<std::vector<Use>> users(n);
    std::vector<std::vector<uint32_t>> pending(n);
    std::vector<uint32_t> queue;
    for (uint32_t r = 0; r < n; ++r) {
      pending[r].resize(rules_[r].alts.size());
      for (uint32_t a = 0; a < rules_[r].alts.size(); ++a) {
        const PAlt& alt = rules_[r].alts[a];
        bool terminal = false;
        for (const PElem& e : alt) terminal = terminal || e.kind != GbnfElem::Kind::Rule;
        if (terminal) {
          pending[r][a] = UINT32_MAX;
          continue;
        }
        pending[r][a] = static_cast<uint32_t>(alt.size());
        for (const PElem& e : alt) users[e.rule].push_back({r, a});
        if (alt.empty() && !nullable[r]) {
          nullable[r] = 1;
          queue.push_back(r);
        }
      }
    }
    while (!queue.empty()) {
      const uint32_t x = queue.back();
      queue.pop_back();
      for (const Use& u : users[x])
        if (pending[u.rule][u.alt] != UINT32_MAX && --pending[u.rule][u.alt] == 0 && !nullable[u.rule]) {
          nullable[u.rule] = 1;
          queue.push_back(u.rule);
        }
    }
    // Edges r -> x where x can start r's text. A cycle of them is harmful
    // only if one of its references is followed by more of its
    // alternative (the stack grows each time round); a cycle of references
    // that end their alternatives (`r ::= x r` with x able to be empty)
    // comes back to the same stack, which the matcher sees and stops at,
    // as llama.cpp's does. Strongly connected parts by Tarjan, iterative.
    struct Edge {
      uint32_t to;
      bool tail;
    };
    std::vector<std::vector<Edge>> left(n);
    for (uint32_t r = 0; r < n; ++r)
      for (const PAlt& alt : rules_[r].alts)
        for (size_t k = 0; k < alt.size(); ++k) {
          if (alt[k].kind != GbnfElem::Kind::Rule) break;
          left[r].push_back({alt[k].rule, k + 1 == alt.size()});
          if (!nullable[alt[k].rule]) break;
        }
    constexpr uint32_t kNone = UINT32_MAX;
    std::vector<uint32_t> index(n, kNone), low(n, 0), part(n, kNone), stack;
    std::vector<char> on_stack(n, 0);
    std::vector<std::pair<uint32_t, size_t>> calls;
    uint32_t counter = 0, parts = 0;
    for (uint32_t s = 0; s < n; ++s) {
      if (index[s] != kNone) continue;
      index[s] = low[s] = counter++;
      stack.push_back(s);
      on_stack[s] = 1;
      calls.emplace_back(s, 0);
      while (!calls.empty()) {
        const uint32_t v = calls.back().first;
        size_t& i = calls.back().second;
        if (i < left[v].size()) {
          const uint32_t w = left[v][i++].to;
          if (index[w] == kNone) {
            index[w] = low[w] = counter++;
            stack.push_back(w);
            on_stack[w] = 1;
            calls.emplace_back(w, 0);
          } else if (on_stack[w]) {
            low[v] = std::min(low[v], index[w]);
          }
          continue;
        }
        if (low[v] == index[v]) {
          uint32_t w = kNone;
          do {
            w = stack.back();
            stack.pop_back();
            on_stack[w] = 0;
            part[w] = parts;
          } while (w != v);
          ++parts;
        }
        calls.pop_back();
        if (!calls.empty()) low[calls.back().first] = std::min(low[calls.back().first], low[v]);
      }
    }
    for (uint32_t r = 0; r < n; ++r)
      for (const Edge& e : left[r])
        if (part[e.to] == part[r] && !e.tail)
          return fail_at(rules_[e.to].first_use,
                         "rule '" + rules_[e.to].name + "' is left-recursive (it can start with itself)");
    return true;
  }

  std::string_view s_;
  const GbnfTokens* tokens_;
  size_t p_ = 0;
  std::vector<PRule> rules_;
  std::unordered_map<std::string, uint32_t> ids_;
  size_t elements_ = 0;
  uint64_t generated_ = 0;
  std::string err_;
  std::shared_ptr<Gbnf> g_;
};

Result<std::shared_ptr<const Gbnf>> Gbnf::parse(std::string_view text, const GbnfTokens* tokens) {
  return GbnfParser(text, tokens).run();
}

Result<std::shared_ptr<const Gbnf>> Gbnf::choice(std::span<const std::string> choices) {
  if (choices.empty()) return make_error("the list of choices is empty");
  std::string text = "root ::= ";
  for (size_t i = 0; i < choices.size(); ++i) {
    if (i) text += " | ";
    text += '"';
    for (const char c : choices[i]) {
      const auto u = static_cast<unsigned char>(c);
      if (c == '"' || c == '\\' || u < 0x20) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\x%02X", u);
        text += buf;
      } else {
        text += c;
      }
    }
    text += '"';
  }
  text += '\n';
  auto g = parse(text);
  if (!g.ok()) return make_error("choices: " + g.error().message);
  return g;
}

bool Gbnf::matches(const GbnfElem& e, uint32_t cp) const {
  if (e.kind == GbnfElem::Kind::Any) return true;
  if (e.kind == GbnfElem::Kind::Token) return false;
  bool in = false;
  for (uint32_t i = e.value; i < e.value + e.count && !in; ++i) in = cp >= ranges_[i].first && cp <= ranges_[i].second;
  return in != e.negated;
}

bool Gbnf::may_match(const GbnfElem& e, uint32_t lo, uint32_t hi) const {
  if (e.kind == GbnfElem::Kind::Any) return true;
  if (e.kind == GbnfElem::Kind::Token) return false;
  if (!e.negated) {
    for (uint32_t i = e.value; i < e.value + e.count; ++i)
      if (ranges_[i].first <= hi && ranges_[i].second >= lo) return true;
    return false;
  }
  // Negated: some character of [lo, hi] lies outside every (sorted, merged) range.
  uint32_t next = lo;
  for (uint32_t i = e.value; i < e.value + e.count && next <= hi; ++i) {
    if (ranges_[i].second < next) continue;
    if (ranges_[i].first > next) return true;
    if (ranges_[i].second >= hi) return false;
    next = ranges_[i].second + 1;
  }
  return next <= hi;
}

}  // namespace ss
