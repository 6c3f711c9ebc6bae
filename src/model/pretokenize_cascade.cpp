// Pre-tokenizers that llama.cpp runs as a list of regexes (default,
// deepseek-coder, and the digits-first family): the first splits
// the text into its matches and the gaps between them, the next splits each
// of those pieces the same way, and so on. Each regex here is a matcher that
// says how long a match starting at a code point is (leftmost, greedy: the
// search a regex engine does for these simple patterns).
#include <functional>

#include "model/code_points.h"
#include "model/tokenizer.h"

namespace ss {

using pretok::Cls;
using pretok::Cp;

namespace {

struct Span {
  size_t a, b;  // code points [a, b)
};

// Length of the match at i (0: none), not past end.
using Matcher = std::function<size_t(const std::vector<Cp>&, size_t i, size_t end)>;

std::vector<Span> split(const std::vector<Cp>& cps, const std::vector<Span>& in, const Matcher& m) {
  std::vector<Span> out;
  for (const Span& s : in) {
    size_t gap = s.a, i = s.a;
    while (i < s.b) {
      const size_t len = m(cps, i, s.b);
      if (len == 0) {
        ++i;
        continue;
      }
      if (gap < i) out.push_back({gap, i});
      out.push_back({i, i + len});
      i += len;
      gap = i;
    }
    if (gap < s.b) out.push_back({gap, s.b});
  }
  return out;
}

// A run of code points for which pred holds, after an optional one for
// which lead holds (greedy; the lead is given back when no run follows it).
Matcher run_of(std::function<bool(const Cp&)> pred, std::function<bool(const Cp&)> lead = nullptr) {
  return [pred, lead](const std::vector<Cp>& c, size_t i, size_t end) -> size_t {
    size_t j = i;
    if (lead && lead(c[j]) && j + 1 < end && pred(c[j + 1])) ++j;
    if (!pred(c[j])) return 0;
    while (j < end && pred(c[j])) ++j;
    return j - i;
  };
}

// GPT-2's regex over one piece, as pretokenize(Gpt2) splits it.
std::vector<Span> split_gpt2(std::string_view text, const std::vector<Cp>& cps, const std::vector<Span>& in) {
  std::vector<Span> out;
  for (const Span& s : in) {
    const size_t byte0 = cps[s.a].begin;
    const auto pieces = pretokenize(text.substr(byte0, cps[s.b - 1].end - byte0), PreTokenizer::Gpt2);
    size_t k = s.a;
    for (const auto& p : pieces) {
      const size_t start = k, stop = cps[k].begin + p.size();
      while (k < s.b && cps[k].begin < stop) ++k;
      out.push_back({start, k});
    }
  }
  return out;
}

bool is_digit(const Cp& c) { return c.cp >= '0' && c.cp <= '9'; }
bool is_number(const Cp& c) { return c.cls == Cls::Number; }
bool is_letter(const Cp& c) { return c.cls == Cls::Letter; }
bool is_space(const Cp& c) { return c.cls == Cls::Space; }
bool is_punct(const Cp& c) { return pretok::is_punct(c.cp); }

}  // namespace

std::vector<std::string> pretokenize_cascade(std::string_view text, PreTokenizer kind) {
  const std::vector<Cp> cps = pretok::code_points(text);
  std::vector<Span> spans;
  if (!cps.empty()) spans.push_back({0, cps.size()});
  auto one = [](bool (*pred)(const Cp&)) -> Matcher {
    return [pred](const std::vector<Cp>& c, size_t i, size_t) -> size_t { return pred(c[i]) ? 1 : 0; };
  };
  if (kind == PreTokenizer::DigitsThenGpt2) {
    // \p{N} | GPT-2: every number alone, then GPT-2's regex between them
    spans = split(cps, spans, one(is_number));
    spans = split_gpt2(text, cps, spans);
  } else if (kind == PreTokenizer::DeepseekCoder) {
    // [\r\n] | \s?\p{L}+ | \s?\p{P}+ | [一-龥ࠀ-一가-퟿]+ | \p{N}
    spans = split(cps, spans, one(pretok::is_crlf));
    spans = split(cps, spans, run_of(is_letter, is_space));
    spans = split(cps, spans, run_of(is_punct, is_space));
    spans = split(cps, spans, run_of([](const Cp& c) {
                    return (c.cp >= 0x4E00 && c.cp <= 0x9FA5) || (c.cp >= 0x0800 && c.cp <= 0x4E00) ||
                           (c.cp >= 0xAC00 && c.cp <= 0xD7FF);
                  }));
    spans = split(cps, spans, one(is_number));
  } else {
    // [\p{P}\$\+<=>\^~\|]+ | GPT-2 | \p{N}+ | [0-9][0-9][0-9]
    spans = split(cps, spans, run_of([](const Cp& c) {
                    return is_punct(c) || c.cp == '$' || c.cp == '+' || c.cp == '<' || c.cp == '=' || c.cp == '>' ||
                           c.cp == '^' || c.cp == '~' || c.cp == '|';
                  }));
    spans = split_gpt2(text, cps, spans);
    spans = split(cps, spans, run_of(is_number));
    spans = split(cps, spans, [](const std::vector<Cp>& c, size_t i, size_t end) -> size_t {
      return i + 3 <= end && is_digit(c[i]) && is_digit(c[i + 1]) && is_digit(c[i + 2]) ? 3 : 0;
    });
  }
  std::vector<std::string> out;
  out.reserve(spans.size());
  for (const Span& s : spans) out.emplace_back(text.substr(cps[s.a].begin, cps[s.b - 1].end - cps[s.a].begin));
  return out;
}

}  // namespace ss
