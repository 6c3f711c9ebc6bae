// Hand-written equivalents of the byte-level BPE pre-tokenizer regexes
// (GPT-2, Llama-3, Qwen2), so no regex engine with \p{..} support is needed.
#include <locale.h>

#include <clocale>
#include <cwctype>

#include "model/tokenizer.h"

namespace ss {

namespace {

enum class Cls { Letter, Number, Space, Other };

locale_t utf8_locale() {
  static locale_t loc = newlocale(LC_CTYPE_MASK, "C.UTF-8", static_cast<locale_t>(nullptr));
  return loc;
}

Cls classify(uint32_t cp) {
  if (cp < 0x80) {
    if ((cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z')) return Cls::Letter;
    if (cp >= '0' && cp <= '9') return Cls::Number;
    if (cp == ' ' || (cp >= 0x09 && cp <= 0x0D)) return Cls::Space;
    return Cls::Other;
  }
  const locale_t loc = utf8_locale();
  const auto wc = static_cast<wint_t>(cp);
  if (loc) {
    if (iswspace_l(wc, loc) || cp == 0x85 || cp == 0xA0) return Cls::Space;
    if (iswalpha_l(wc, loc)) return Cls::Letter;
    if (iswdigit_l(wc, loc)) return Cls::Number;
    return Cls::Other;
  }
  return Cls::Letter;  // no Unicode tables: treat non-ASCII as word characters
}

struct Cp {
  uint32_t cp;
  size_t begin, end;  // byte range
  Cls cls;
};

}  // namespace

std::vector<std::string> pretokenize(std::string_view text, PreTokenizer kind) {
  std::vector<Cp> cps;
  for (size_t i = 0; i < text.size();) {
    const size_t b = i;
    const uint32_t cp = utf8_next(text, i);
    cps.push_back({cp, b, i, classify(cp)});
  }
  const size_t n = cps.size();
  std::vector<std::string> out;
  auto emit = [&](size_t a, size_t b) {
    if (b > a) out.emplace_back(text.substr(cps[a].begin, cps[b - 1].end - cps[a].begin));
  };
  auto is_crlf = [&](size_t k) { return cps[k].cp == '\r' || cps[k].cp == '\n'; };
  const bool llama3 = kind == PreTokenizer::Llama3 || kind == PreTokenizer::Qwen2;
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
        if (cps[j].cls != Cls::Letter && cps[j].cls != Cls::Number && !is_crlf(j) && j + 1 < n &&
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
      if (cps[i].cls == Cls::Number) {
        const size_t max = kind == PreTokenizer::Qwen2 ? 1 : 3;
        size_t j = i;
        while (j < n && j - i < max && cps[j].cls == Cls::Number) ++j;
        emit(i, j);
        i = j;
        continue;
      }
      // 4. " ?[^\s\p{L}\p{N}]+[\r\n]*"
      {
        size_t j = i;
        if (cps[j].cp == ' ' && j + 1 < n && cps[j + 1].cls == Cls::Other) ++j;
        if (cps[j].cls == Cls::Other) {
          while (j < n && cps[j].cls == Cls::Other) ++j;
          while (j < n && is_crlf(j)) ++j;
          emit(i, j);
          i = j;
          continue;
        }
      }
      // 5. \s*[\r\n]+
      {
        size_t j = i, last_nl = n;
        while (j < n && cps[j].cls == Cls::Space) {
          if (is_crlf(j)) last_nl = j;
          ++j;
        }
        if (last_nl != n) {
          emit(i, last_nl + 1);
          i = last_nl + 1;
          continue;
        }
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
    size_t j = i;
    while (j < n && cps[j].cls == Cls::Space) ++j;
    if (j > i) {
      if (j < n && j - i >= 2) --j;  // leave one space to prefix the next word
      emit(i, j);
      i = j;
      continue;
    }
    emit(i, i + 1);  // unreachable in practice: consume one code point
    ++i;
  }
  return out;
}

}  // namespace ss
