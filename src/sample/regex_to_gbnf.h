#pragma once
// A regular expression (vLLM's "guided_regex": the whole answer matches it)
// written as the GBNF grammar (gbnf.h) of the same language, as llama.cpp
// turns a schema's "pattern" into grammar rules.
//
// ECMAScript syntax, the part that describes a language: literals and
// escapes (\t \n \r \f \v \0 \xHH \uHHHH, an escaped punctuation mark is
// itself), classes [...] / [^...] with ranges, . (any character but line
// terminators), \d \w \s and \D \W \S (ASCII, as ECMAScript without the u
// flag reads \d and \w; \s as the ASCII spaces), groups (...) (?:...)
// (?<name>...), alternation, quantifiers * + ? {m} {m,} {m,n} (lazy forms
// match the same texts), ^ at the start and $ at the end. Refused with the offset: backreferences, lookarounds,
// word boundaries, anchors elsewhere, \D \W \S inside a class.
#include <string>
#include <string_view>

#include "util/result.h"

namespace ss {

enum class RegexMatch {
  Whole,   // the whole text matches (vLLM's guided_regex; ^ and $ change nothing)
  Search,  // some part of it does (JSON Schema's "pattern": ^ and $ anchor)
};

Result<std::string> regex_to_gbnf(std::string_view pattern, RegexMatch match = RegexMatch::Whole);

}  // namespace ss
