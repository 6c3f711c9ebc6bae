#pragma once
// Code points of a text with the Unicode classes the pre-tokenizer regexes
// of byte-level BPE vocabularies are written in (\p{L}, \p{N}, \s, \p{P}).
// Internal to the pre-tokenizers.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace ss::pretok {

enum class Cls { Letter, Number, Space, Other };

// Unicode general categories as the regexes mean them: \p{L} letters,
// \p{N} numbers (also ½, ², Arabic-Indic digits), \s White_Space.
Cls classify(uint32_t cp);
// \p{P}: Unicode punctuation (ASCII $ + < = > ^ ` | ~ are symbols, not P).
bool is_punct(uint32_t cp);

struct Cp {
  uint32_t cp;
  size_t begin, end;  // byte range in the text
  Cls cls;
};

std::vector<Cp> code_points(std::string_view text);

inline bool is_crlf(const Cp& c) { return c.cp == '\r' || c.cp == '\n'; }

// \p{N}{1,max} at i: the end of the run of at most max numbers, or i.
inline size_t numbers_end(const std::vector<Cp>& cps, size_t i, size_t max) {
  size_t j = i;
  while (j < cps.size() && j - i < max && cps[j].cls == Cls::Number) ++j;
  return j;
}

}  // namespace ss::pretok
