#include "sample/number_rules.h"

#include <algorithm>

namespace ss {

namespace {

Fixed floor_div(Fixed a, Fixed b) {  // b > 0
  Fixed q = a / b;
  if (a % b != 0 && a < 0) --q;
  return q;
}

}  // namespace

bool NumberRules::reachable(Fixed lo, Fixed hi) const {
  const Fixed a = std::max(lo, min), b = std::min(hi, max);
  if (a > b) return false;
  return step == 0 || floor_div(b, step) * step >= a;
}

std::optional<Fixed> parse_fixed(std::string_view s, bool up, bool* exact) {
  size_t i = 0;
  const bool negative = i < s.size() && s[i] == '-';
  if (negative) ++i;
  // The digits as one integer (saturated far past the limit) and the power
  // of ten that scales it.
  constexpr Fixed kSaturated = kFixedLimit * 1000;
  Fixed digits = 0;
  int scale = 0;
  bool any_digit = false, dropped_nonzero = false;
  auto take = [&](char c) {
    if (digits < kSaturated) {
      digits = digits * 10 + (c - '0');
    } else {
      ++scale;  // a digit past the precision kept: it scales what came before
      dropped_nonzero = dropped_nonzero || c != '0';
    }
  };
  for (; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i, any_digit = true) take(s[i]);
  if (i < s.size() && s[i] == '.') {
    ++i;
    for (; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i, any_digit = true) {
      if (digits < kSaturated) {
        take(s[i]);
        --scale;
      } else {
        dropped_nonzero = dropped_nonzero || s[i] != '0';
      }
    }
  }
  if (!any_digit) return std::nullopt;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    const bool neg_exp = i < s.size() && s[i] == '-';
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
    if (i == s.size()) return std::nullopt;
    int e = 0;
    for (; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i) e = std::min(e * 10 + (s[i] - '0'), 100000);
    scale += neg_exp ? -e : e;
  }
  if (i != s.size()) return std::nullopt;
  scale += kFixedDigits;
  // Magnitude digits * 10^scale, rounded toward zero; `inexact` if it was.
  bool inexact = dropped_nonzero;
  Fixed m = digits;
  if (scale >= 0) {
    for (int k = 0; k < scale && m != 0; ++k) {
      if (m >= kFixedLimit) break;
      m *= 10;
    }
  } else {
    for (int k = 0; k < -scale && m != 0; ++k) {
      inexact = inexact || m % 10 != 0;
      m /= 10;
    }
  }
  if (m >= kFixedLimit) {
    m = kFixedLimit;
    inexact = false;  // saturated: the bound lies past every value, rounding changes nothing
  }
  // Toward zero was a floor for positive values and a ceiling for negative ones.
  if (inexact && up != negative) ++m;
  if (exact) *exact = !inexact;
  return negative ? -m : m;
}

}  // namespace ss
