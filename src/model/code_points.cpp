#include "model/code_points.h"

#include <unicode/uchar.h>

#include "util/utf8.h"

namespace ss::pretok {

Cls classify(uint32_t cp) {
  if (cp < 0x80) {
    if ((cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z')) return Cls::Letter;
    if (cp >= '0' && cp <= '9') return Cls::Number;
    if (cp == ' ' || (cp >= 0x09 && cp <= 0x0D)) return Cls::Space;
    return Cls::Other;
  }
  const auto c = static_cast<UChar32>(cp);
  if (u_isUWhiteSpace(c)) return Cls::Space;
  switch (u_charType(c)) {
    case U_UPPERCASE_LETTER:
    case U_LOWERCASE_LETTER:
    case U_TITLECASE_LETTER:
    case U_MODIFIER_LETTER:
    case U_OTHER_LETTER:
      return Cls::Letter;
    case U_DECIMAL_DIGIT_NUMBER:
    case U_LETTER_NUMBER:
    case U_OTHER_NUMBER:
      return Cls::Number;
    default:
      return Cls::Other;
  }
}

std::vector<Cp> code_points(std::string_view text) {
  std::vector<Cp> cps;
  for (size_t i = 0; i < text.size();) {
    const size_t b = i;
    const uint32_t cp = utf8_next(text, i);
    cps.push_back({cp, b, i, classify(cp)});
  }
  return cps;
}

bool is_punct(uint32_t cp) {
  switch (u_charType(static_cast<UChar32>(cp))) {
    case U_CONNECTOR_PUNCTUATION:
    case U_DASH_PUNCTUATION:
    case U_START_PUNCTUATION:
    case U_END_PUNCTUATION:
    case U_INITIAL_PUNCTUATION:
    case U_FINAL_PUNCTUATION:
    case U_OTHER_PUNCTUATION:
      return true;
    default:
      return false;
  }
}

}  // namespace ss::pretok
