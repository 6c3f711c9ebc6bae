#pragma once
// A deterministic automaton over code points, built from a GBNF grammar of
// a regular language (regex_to_gbnf.h): what a JSON string's "pattern"
// becomes, so the recognizer (json_grammar.h) carries one state number per
// string instead of a matcher, and a string's length limits can be folded
// into the states.
//
// States are found by stepping the grammar's matcher (gbnf_matcher.h) over
// one character of each class of code points the grammar cannot tell apart
// (the bounds of its character ranges cut the code point space into such
// classes). Only states from which an accepting state can still be reached
// are kept, so a string that has a state can always be finished. Grammars
// whose automaton would pass the caps, or whose matcher drops parses, are
// errors, never approximated.
#include <cstdint>
#include <limits>
#include <memory>
#include <string_view>
#include <vector>

#include "sample/gbnf.h"
#include "util/result.h"

namespace ss {

class CharDfa {
 public:
  static constexpr int32_t kDead = -1;
  static constexpr uint32_t kNoLimit = std::numeric_limits<uint32_t>::max();

  struct Limits {
    size_t max_states = 4096;
    size_t max_entries = size_t{1} << 16;  // states x classes, the table's size
    size_t max_work = size_t{1} << 22;     // the matcher's expansion steps and the states' words while building
  };

  // The automaton of `grammar`'s texts whose length in code points is within
  // [min_chars, max_chars] (kNoLimit: none). An error if no text is, or past
  // the limits.
  static Result<std::shared_ptr<const CharDfa>> build(std::shared_ptr<const Gbnf> grammar, uint32_t min_chars,
                                                      uint32_t max_chars, const Limits& limits);
  static Result<std::shared_ptr<const CharDfa>> build(std::shared_ptr<const Gbnf> grammar, uint32_t min_chars,
                                                      uint32_t max_chars) {
    return build(std::move(grammar), min_chars, max_chars, Limits{});
  }

  int32_t start() const { return 0; }
  // The state after character cp, or kDead.
  int32_t step(int32_t state, uint32_t cp) const;
  // The state after the UTF-8 text `text` (kDead once a character leads nowhere).
  int32_t run(int32_t state, std::string_view text) const;
  // Whether some character in [lo, hi] leads to a state.
  bool any_in(int32_t state, uint32_t lo, uint32_t hi) const;
  bool accepts(int32_t state) const { return accept_[static_cast<size_t>(state)] != 0; }
  size_t state_count() const { return accept_.size(); }
  size_t class_count() const { return class_start_.size(); }
  size_t build_work() const { return build_work_; }  // what building took, as Limits::max_work counts it

 private:
  size_t class_of(uint32_t cp) const;

  std::vector<uint32_t> class_start_;  // sorted; class i is [class_start_[i], class_start_[i + 1])
  std::vector<int32_t> next_;          // [state * classes + class]
  std::vector<uint8_t> accept_;        // by state
  size_t build_work_ = 0;
};

}  // namespace ss
