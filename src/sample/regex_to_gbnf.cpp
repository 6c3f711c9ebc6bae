#include "sample/regex_to_gbnf.h"

#include <cctype>
#include <cstdio>
#include <utility>
#include <vector>

#include "sample/gbnf.h"
#include "util/hex.h"
#include "util/utf8.h"

namespace ss {

namespace {

using Ranges = std::vector<std::pair<uint32_t, uint32_t>>;

std::string esc(uint32_t cp) {  // valid inside GBNF literals and classes alike
  char buf[16];
  std::snprintf(buf, sizeof buf, "\\U%08X", cp);
  return buf;
}

std::string klass(const Ranges& rs, bool negated) {
  std::string out = negated ? "[^" : "[";
  for (const auto& [lo, hi] : rs) out += lo == hi ? esc(lo) : esc(lo) + "-" + esc(hi);
  return out + "]";
}

const Ranges kDigit = {{'0', '9'}};
const Ranges kWord = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
const Ranges kSpace = {{'\t', '\r'}, {' ', ' '}};  // \t \n \v \f \r and space
const Ranges kLineEnds = {{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}};

class RegexReader {
 public:
  explicit RegexReader(std::string_view s) : s_(s) {}

  Result<std::string> run(RegexMatch match) {
    if (s_.size() > Gbnf::kMaxTextBytes / 16) return make_error("regex: too long");
    const bool from_start = at() == '^';
    if (from_start) ++p_;
    std::string body;
    if (!alternatives(body, 0)) return make_error("regex: " + err_);
    if (!end()) return make_error("regex: unexpected ')' at offset " + std::to_string(p_));
    if (match == RegexMatch::Whole) return "root ::= " + body + "\n";
    // `^a|b$` anchors one alternative each: not a whole-text match to bracket.
    if ((from_start || to_end_) && top_alternation_)
      return make_error(
          "regex: '^' or '$' beside alternatives at the top level is not supported (group them: ^(a|b)$)");
    return "root ::= " + std::string(from_start ? "" : ".* ") + body + (to_end_ ? "" : " .*") + "\n";
  }

 private:
  bool end() const { return p_ >= s_.size(); }
  char at(size_t k = 0) const { return p_ + k < s_.size() ? s_[p_ + k] : '\0'; }
  bool fail(const std::string& msg) {
    if (err_.empty()) err_ = msg + " at offset " + std::to_string(p_);
    return false;
  }
  // A '$' is the end only as the last character (or before a closing
  // alternative's end at the top): the match is whole anyway.
  bool at_dollar_end() const { return at() == '$' && p_ + 1 == s_.size(); }

  bool alternatives(std::string& out, int depth) {
    std::string seq;
    if (!sequence(seq, depth)) return false;
    out = "(" + seq;
    while (at() == '|') {
      ++p_;
      top_alternation_ = top_alternation_ || depth == 0;
      seq.clear();
      if (!sequence(seq, depth)) return false;
      out += " | " + seq;
    }
    out += ")";
    return true;
  }

  bool sequence(std::string& out, int depth) {
    while (!end() && at() != '|' && at() != ')') {
      if (at_dollar_end()) {
        ++p_;
        to_end_ = true;
        break;
      }
      std::string atom;
      if (!this->atom(atom, depth)) return false;
      if (!quantifier(atom)) return false;
      out += atom + " ";
    }
    return true;
  }

  bool quantifier(std::string& atom) {
    const char c = at();
    if (c == '*' || c == '+' || c == '?') {
      ++p_;
      atom += c;
    } else if (c == '{' && std::isdigit(static_cast<unsigned char>(at(1)))) {
      const size_t start = p_;
      ++p_;
      std::string q = "{";
      while (std::isdigit(static_cast<unsigned char>(at()))) q += s_[p_++];
      if (at() == ',') {
        q += s_[p_++];
        while (std::isdigit(static_cast<unsigned char>(at()))) q += s_[p_++];
      }
      if (at() != '}') {
        p_ = start;
        return fail("a '{' that is not a quantifier (escape it)");
      }
      ++p_;
      atom += q + "}";
    } else {
      return true;
    }
    if (at() == '?') ++p_;  // lazy: the same texts
    if (at() == '*' || at() == '+' || at() == '?' || (at() == '{' && std::isdigit(static_cast<unsigned char>(at(1)))))
      return fail("a quantifier after a quantifier");
    return true;
  }

  bool atom(std::string& out, int depth) {
    const char c = at();
    if (c == '(') {
      if (depth + 1 > Gbnf::kMaxNesting) return fail("groups nest deeper than " + std::to_string(Gbnf::kMaxNesting));
      ++p_;
      if (at() == '?') {
        if (at(1) == ':') {
          p_ += 2;
        } else if (at(1) == '<' && at(2) != '=' && at(2) != '!') {  // a named group
          p_ += 2;
          while (!end() && at() != '>') ++p_;
          if (end()) return fail("an unterminated group name");
          ++p_;
        } else {
          return fail("lookarounds are not supported");
        }
      }
      if (!alternatives(out, depth + 1)) return false;
      if (at() != ')') return fail("expected ')'");
      ++p_;
      return true;
    }
    if (c == '[') return char_class(out);
    if (c == '.') {
      ++p_;
      out = klass(kLineEnds, true);
      return true;
    }
    if (c == '^' || c == '$') return fail("anchors are supported only at the start and end");
    if (c == '*' || c == '+' || c == '?') return fail("a quantifier follows nothing");
    if (c == ')') return fail("unbalanced ')'");
    if (c == '\\') {
      Ranges rs;
      bool negated = false;
      uint32_t cp = 0;
      if (!escape(cp, &rs, &negated)) return false;
      out = rs.empty() ? klass({{cp, cp}}, false) : klass(rs, negated);
      return true;
    }
    uint32_t cp = 0;
    if (!character(cp)) return false;
    out = klass({{cp, cp}}, false);
    return true;
  }

  bool character(uint32_t& cp) {
    const size_t start = p_;
    cp = utf8_next(s_, p_);
    if (cp == 0xFFFD && !(s_.substr(start, 3) == "\xEF\xBF\xBD")) {
      p_ = start;
      return fail("invalid UTF-8");
    }
    return true;
  }

  bool hex(int digits, uint32_t& cp) {
    if (!read_hex(s_, p_, digits, cp)) return fail("expected hex digits");
    return true;
  }

  // After a backslash: one character (cp), or a shorthand class (rs, negated).
  bool escape(uint32_t& cp, Ranges* rs, bool* negated) {
    ++p_;
    if (end()) return fail("a '\\' ends the pattern");
    const char e = at();
    ++p_;
    switch (e) {
      case 'd':
        *rs = kDigit;
        return true;
      case 'w':
        *rs = kWord;
        return true;
      case 's':
        *rs = kSpace;
        return true;
      case 'D':
        *rs = kDigit, *negated = true;
        return true;
      case 'W':
        *rs = kWord, *negated = true;
        return true;
      case 'S':
        *rs = kSpace, *negated = true;
        return true;
      case 't':
        cp = '\t';
        return true;
      case 'n':
        cp = '\n';
        return true;
      case 'r':
        cp = '\r';
        return true;
      case 'f':
        cp = '\f';
        return true;
      case 'v':
        cp = '\v';
        return true;
      case '0':
        cp = 0;
        return true;
      case 'x':
        return hex(2, cp);
      case 'u':
        return hex(4, cp);
      case 'b':
      case 'B':
        --p_;
        return fail("word boundaries are not supported");
      default:
        break;
    }
    if (std::isdigit(static_cast<unsigned char>(e))) {
      --p_;
      return fail("backreferences are not supported");
    }
    if (std::isalnum(static_cast<unsigned char>(e))) {
      --p_;
      return fail(std::string("unknown escape '\\") + e + "'");
    }
    --p_;
    return character(cp);  // an escaped mark (or any other character) is itself
  }

  bool char_class(std::string& out) {
    ++p_;
    bool negated = false;
    if (at() == '^') {
      negated = true;
      ++p_;
    }
    Ranges rs;  // ECMAScript: "[]" matches nothing, "[^]" anything
    while (!end() && at() != ']') {
      uint32_t lo = 0;
      Ranges shorthand;
      bool neg = false;
      if (at() == '\\') {
        if (!escape(lo, &shorthand, &neg)) return false;
        if (neg) return fail("\\D, \\W, \\S inside a class are not supported");
        if (!shorthand.empty()) {
          rs.insert(rs.end(), shorthand.begin(), shorthand.end());
          continue;
        }
      } else if (!character(lo)) {
        return false;
      }
      uint32_t hi = lo;
      if (at() == '-' && at(1) != ']' && p_ + 1 < s_.size()) {
        ++p_;
        if (at() == '\\') {
          if (!escape(hi, &shorthand, &neg)) return false;
          if (!shorthand.empty()) return fail("a class shorthand ends a range");
        } else if (!character(hi)) {
          return false;
        }
        if (hi < lo) return fail("a range ends before it starts");
      }
      rs.emplace_back(lo, hi);
    }
    if (end()) return fail("an unterminated class");
    ++p_;
    out = klass(rs, negated);
    return true;
  }

  std::string_view s_;
  size_t p_ = 0;
  std::string err_;
  bool to_end_ = false;           // a final '$' was read
  bool top_alternation_ = false;  // the pattern is a|b at the top
};

}  // namespace

Result<std::string> regex_to_gbnf(std::string_view pattern, RegexMatch match) {
  return RegexReader(pattern).run(match);
}

}  // namespace ss
