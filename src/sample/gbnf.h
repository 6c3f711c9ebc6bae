#pragma once
// A GBNF grammar (llama.cpp's grammar format: the server's "grammar" field,
// the CLI's --grammar / --grammar-file; vLLM's "guided_grammar" takes the
// same text through xgrammar), parsed into the flat rule table the matcher
// (gbnf_matcher.h) walks over code points.
//
// The syntax is llama.cpp's: `name ::= alternatives` rules (names of
// letters, digits and '-'; `root` is where a text starts), literals "..."
// and classes [a-z] / [^...] with the escapes \x.. \u.... \U........ \t \r
// \n \\ \" \[ \], `.` for any character, groups ( ), repetition * + ? {m}
// {m,} {m,n}, comments from '#'. A rule ends at a newline unless it is
// inside parentheses or follows '|'. Repetitions are rewritten into helper
// rules as llama.cpp does (x{2,4} -> x x x'; x' ::= x x'' | ...).
//
// Token references, as llama.cpp's: `<[id]>` is the token with that id,
// `<text>` the one token `text` (brackets included) is with special tokens
// read (`<think>`; a text of several tokens is refused), and `!<[id]>` /
// `!<text>` any token but that one. They match whole tokens by id, so they
// reach control tokens (which add no bytes) and ignore what a token spells;
// they need the model's vocabulary (GbnfTokens) and never match an
// end-of-generation token (the answer ends where the grammar may end, so
// `<[eos id]>` is refused).
//
// Refused with a message naming the place, never loaded half way: token
// references without a vocabulary or naming none of its tokens, left recursion that would grow the parse
// stack without reading (`x ::= x "a"`: the matcher could not terminate;
// a loop through rules that may be empty and end their alternatives,
// `x ::= y x |`, is taken as llama.cpp takes it), undefined or redefined
// rules, a missing root, and grammars past the caps below (a request's
// grammar runs on the scheduling thread).
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "util/result.h"

namespace ss {

struct GbnfElem {
  enum class Kind : uint8_t {
    End,    // of an alternative
    Rule,   // a reference: `value` is the rule's index
    Chars,  // one character in ranges [value, value + count) of the range table (negated: not in them)
    Any,    // any character
    Token,  // one token: `value` is its id (negated: any other token)
  };
  Kind kind = Kind::End;
  bool negated = false;
  uint32_t value = 0;
  uint32_t count = 0;
};

// The vocabulary token references resolve against.
struct GbnfTokens {
  int64_t vocab_size = 0;
  // The id of the one token `text` is (special tokens read), if it is one.
  std::function<std::optional<int32_t>(std::string_view)> token_of;
  // End-of-generation ids: a reference to one is refused (the answer ends
  // where the grammar may end; !<...> of one is any token).
  std::vector<int32_t> ends;
};

class Gbnf {
 public:
  static constexpr size_t kMaxTextBytes = 1 << 20;
  static constexpr size_t kMaxElements = 1 << 18;  // after repetitions are written out
  static constexpr uint64_t kMaxRepetitions = 2000;
  static constexpr int kMaxNesting = 64;  // parentheses inside each other
  static constexpr uint32_t kMaxCodePoint = 0x10FFFF;

  // `tokens`: where token references resolve (none: they are refused).
  static Result<std::shared_ptr<const Gbnf>> parse(std::string_view text, const GbnfTokens* tokens = nullptr);
  // The grammar of exactly one of `choices` (vLLM's guided_choice).
  static Result<std::shared_ptr<const Gbnf>> choice(std::span<const std::string> choices);

  uint32_t root() const { return root_; }
  size_t rule_count() const { return rule_alts_.size(); }
  const std::string& rule_name(uint32_t rule) const { return names_[rule]; }
  // Element index of each alternative's first element; an alternative runs to its End.
  std::span<const uint32_t> alternatives(uint32_t rule) const { return rule_alts_[rule]; }
  const GbnfElem& elem(uint32_t pos) const { return elems_[pos]; }
  size_t element_count() const { return elems_.size(); }

  // The ranges of a Chars element (inclusive; the characters it matches if
  // not negated).
  std::span<const std::pair<uint32_t, uint32_t>> ranges(const GbnfElem& e) const {
    return std::span<const std::pair<uint32_t, uint32_t>>(ranges_).subspan(e.value, e.count);
  }
  // Whether character `cp` matches the character element `e` (Chars / Any;
  // a Token element matches no character).
  bool matches(const GbnfElem& e, uint32_t cp) const;
  // Whether some character in [lo, hi] matches it (a partly read UTF-8 character).
  bool may_match(const GbnfElem& e, uint32_t lo, uint32_t hi) const;

 private:
  friend class GbnfParser;
  std::vector<GbnfElem> elems_;
  std::vector<std::pair<uint32_t, uint32_t>> ranges_;  // inclusive, sorted and merged per element
  std::vector<std::vector<uint32_t>> rule_alts_;
  std::vector<std::string> names_;
  uint32_t root_ = 0;
};

// Whether token `id` matches the Token element `e`.
inline bool token_matches(const GbnfElem& e, int32_t id) {
  return e.kind == GbnfElem::Kind::Token && (static_cast<uint32_t>(id) == e.value) != e.negated;
}

}  // namespace ss
