// Hand-written equivalents of the byte-level BPE pre-tokenizer regexes
// (GPT-2, Llama-3, Qwen2, seed-coder, o200k, tekken; the multi-regex ones are
// in pretokenize_cascade.cpp), so no regex engine with \p{..} support is
// needed.
#include <cctype>

#include "model/code_points.h"
#include "model/tokenizer.h"

namespace ss {

using pretok::Cls;
using pretok::code_points;
using pretok::Cp;
using pretok::is_crlf;
using pretok::numbers_end;

namespace {

// " ?[^\s\p{L}\p{N}]+" then a run of characters `tail` accepts: its end,
// or i when none starts at i.
template <class Tail>
size_t punct_end(const std::vector<Cp>& cps, size_t i, Tail tail) {
  const size_t n = cps.size();
  size_t j = i;
  if (cps[j].cp == ' ' && j + 1 < n && cps[j + 1].cls == Cls::Other) ++j;
  if (cps[j].cls != Cls::Other) return i;
  while (j < n && cps[j].cls == Cls::Other) ++j;
  while (j < n && tail(cps[j])) ++j;
  return j;
}

// \s*[\r\n]+: up to the last line break of the whitespace run at i, or i.
size_t line_breaks_end(const std::vector<Cp>& cps, size_t i) {
  size_t end = i;
  for (size_t j = i; j < cps.size() && cps[j].cls == Cls::Space; ++j)
    if (is_crlf(cps[j])) end = j + 1;
  return end;
}

// \s+(?!\S) then \s+: the whitespace run at i, less its last space when a
// word follows (that space prefixes the word); i when none.
size_t spaces_end(const std::vector<Cp>& cps, size_t i) {
  size_t j = i;
  while (j < cps.size() && cps[j].cls == Cls::Space) ++j;
  if (j < cps.size() && j - i >= 2) --j;
  return j;
}

// o200k (gpt-oss, Llama 4) and tekken, as llama.cpp's adapted regex:
//   [^\r\n\p{L}\p{N}]?U*L+C? | [^\r\n\p{L}\p{N}]?U+L*C? | \p{N}{1,3} |
//   " ?[^\s\p{L}\p{N}]+[\r\n/]*" | \s*[\r\n]+ | \s+(?!\S) | \s+
// where U is a letter other than a-z, L a letter other than A-Z (so a
// non-ASCII letter is both) and C a contraction ('s 't 're 've 'm 'll 'd, any
// case). Tekken: no C, single digits.
std::vector<std::string> pretokenize_o200k(std::string_view text, bool tekken) {
  const std::vector<Cp> cps = code_points(text);
  const size_t n = cps.size();
  std::vector<std::string> out;
  auto emit = [&](size_t a, size_t b) { out.emplace_back(text.substr(cps[a].begin, cps[b - 1].end - cps[a].begin)); };
  auto letter = [&](size_t k) { return k < n && cps[k].cls == Cls::Letter; };
  auto upper = [&](size_t k) { return letter(k) && !(cps[k].cp >= 'a' && cps[k].cp <= 'z'); };
  auto lower = [&](size_t k) { return letter(k) && !(cps[k].cp >= 'A' && cps[k].cp <= 'Z'); };
  auto contraction = [&](size_t k) -> size_t {  // its length at k, or 0
    if (tekken || k >= n || cps[k].cp != '\'' || k + 1 >= n) return 0;
    auto low = [&](size_t q) { return q < n && cps[q].cp < 0x80 ? std::tolower(static_cast<int>(cps[q].cp)) : -1; };
    const int c1 = low(k + 1), c2 = low(k + 2);
    if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') return 2;
    if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) return 3;
    return 0;
  };
  // End of a word starting at p (no prefix), or p when none starts there.
  auto word_end = [&](size_t p) -> size_t {
    size_t u = p;
    while (upper(u)) ++u;
    // U*L+ backtracks U* to the last position from which L+ can start.
    for (size_t k = u + 1; k-- > p;) {
      if (!lower(k)) continue;
      size_t e = k;
      while (lower(e)) ++e;
      return e + contraction(e);
    }
    if (u > p) {  // U+L*
      size_t e = u;
      while (lower(e)) ++e;
      return e + contraction(e);
    }
    return p;
  };
  size_t i = 0;
  while (i < n) {
    // 1./2. words, with one leading character that is no letter, digit or line break
    if (cps[i].cls != Cls::Letter && cps[i].cls != Cls::Number && !is_crlf(cps[i])) {
      const size_t e = word_end(i + 1);
      if (e > i + 1) {
        emit(i, e);
        i = e;
        continue;
      }
    }
    if (const size_t e = word_end(i); e > i) {
      emit(i, e);
      i = e;
      continue;
    }
    // 3. \p{N}{1,3} (tekken: \p{N})
    if (const size_t e = numbers_end(cps, i, tekken ? 1 : 3); e > i) {
      emit(i, e);
      i = e;
      continue;
    }
    // 4. " ?[^\s\p{L}\p{N}]+[\r\n/]*", 5. \s*[\r\n]+, 6./7. \s+(?!\S) then \s+
    size_t e = punct_end(cps, i, [](const Cp& c) { return is_crlf(c) || c.cp == '/'; });
    if (e == i) e = line_breaks_end(cps, i);
    if (e == i) e = spaces_end(cps, i);
    if (e == i) e = i + 1;  // not reached: every code point is matched above
    emit(i, e);
    i = e;
  }
  return out;
}

}  // namespace

std::vector<std::string> pretokenize(std::string_view text, PreTokenizer kind) {
  if (kind == PreTokenizer::Default || kind == PreTokenizer::DeepseekCoder || kind == PreTokenizer::DigitsThenGpt2)
    return pretokenize_cascade(text, kind);
  if (kind == PreTokenizer::Gpt4o || kind == PreTokenizer::Tekken)
    return pretokenize_o200k(text, kind == PreTokenizer::Tekken);
  const std::vector<Cp> cps = code_points(text);
  const size_t n = cps.size();
  std::vector<std::string> out;
  auto emit = [&](size_t a, size_t b) {
    if (b > a) out.emplace_back(text.substr(cps[a].begin, cps[b - 1].end - cps[a].begin));
  };
  const bool llama3 = kind == PreTokenizer::Llama3 || kind == PreTokenizer::Qwen2 || kind == PreTokenizer::SeedCoder;
  // seed-coder: Llama 3's regex with single digits and no line breaks after punctuation.
  const bool seed = kind == PreTokenizer::SeedCoder;
  size_t i = 0;
  while (i < n) {
    // 1. Contractions ('s 't 're 've 'm 'll 'd; case-insensitive for Llama-3).
    if (cps[i].cp == '\'' && i + 1 < n) {
      auto low = [&](size_t k) {
        return llama3 && cps[k].cp < 0x80 ? std::tolower(static_cast<int>(cps[k].cp)) : static_cast<int>(cps[k].cp);
      };
      const int c1 = low(i + 1);
      if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') {
        emit(i, i + 2);
        i += 2;
        continue;
      }
      if (i + 2 < n) {
        const int c2 = low(i + 2);
        if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) {
          emit(i, i + 3);
          i += 3;
          continue;
        }
      }
    }
    if (llama3) {
      // 2. [^\r\n\p{L}\p{N}]?\p{L}+
      {
        size_t j = i;
        if (cps[j].cls != Cls::Letter && cps[j].cls != Cls::Number && !is_crlf(cps[j]) && j + 1 < n &&
            cps[j + 1].cls == Cls::Letter)
          ++j;
        if (cps[j].cls == Cls::Letter) {
          while (j < n && cps[j].cls == Cls::Letter) ++j;
          emit(i, j);
          i = j;
          continue;
        }
      }
      // 3. \p{N}{1,3} (Qwen2: single digits)
      if (const size_t e = numbers_end(cps, i, kind == PreTokenizer::Qwen2 || seed ? 1 : 3); e > i) {
        emit(i, e);
        i = e;
        continue;
      }
      // 4. " ?[^\s\p{L}\p{N}]+[\r\n]*" (seed-coder: " ?[^\s\p{L}\p{N}\r\n]+"), 5. \s*[\r\n]+
      size_t e = punct_end(cps, i, [seed](const Cp& c) { return !seed && is_crlf(c); });
      if (e == i) e = line_breaks_end(cps, i);
      if (e > i) {
        emit(i, e);
        i = e;
        continue;
      }
    } else {
      // GPT-2: " ?\p{L}+", " ?\p{N}+", " ?[^\s\p{L}\p{N}]+"
      size_t j = i;
      if (cps[j].cp == ' ' && j + 1 < n && cps[j + 1].cls != Cls::Space) ++j;
      const Cls c = cps[j].cls;
      if (c != Cls::Space) {
        while (j < n && cps[j].cls == c) ++j;
        emit(i, j);
        i = j;
        continue;
      }
    }
    // 6./7. \s+(?!\S) then \s+
    size_t e = spaces_end(cps, i);
    if (e == i) e = i + 1;  // not reached: every code point is matched above
    emit(i, e);
    i = e;
  }
  return out;
}

}  // namespace ss
