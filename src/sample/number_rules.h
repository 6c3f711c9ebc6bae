#pragma once
// A schema's rules for a number (minimum, maximum, exclusiveMinimum,
// exclusiveMaximum, multipleOf), decided exactly: values are integers in
// units of 10^-16, which holds every number a schema lets the model write
// (at most 16 digits before the point and 16 after) in fewer than 2^107.
#include <cstdint>
#include <optional>
#include <string_view>

namespace ss {

__extension__ typedef __int128 Fixed;  // a value in units of 10^-16

constexpr Fixed pow10_fixed(int n) {
  Fixed p = 1;
  for (int i = 0; i < n; ++i) p *= 10;
  return p;
}
constexpr int kFixedDigits = 16;                              // fraction digits a unit keeps
constexpr Fixed kFixedOne = pow10_fixed(kFixedDigits);        // 1.0
constexpr Fixed kFixedLimit = pow10_fixed(2 * kFixedDigits);  // past every magnitude a schema number has

struct NumberRules {
  Fixed min = -kFixedLimit, max = kFixedLimit;  // inclusive
  Fixed step = 0;                               // values are multiples of it (0: any)

  bool any() const { return min > -kFixedLimit || max < kFixedLimit || step != 0; }
  // Whether some value in [lo, hi] keeps the rules.
  bool reachable(Fixed lo, Fixed hi) const;
  bool allows(Fixed v) const { return reachable(v, v); }
};

// A JSON number's text (RFC 8259) in units, rounded down (`up` false) or up
// to the next unit; magnitudes past kFixedLimit become +-kFixedLimit.
// `exact` tells whether no rounding was needed. Nullopt if not a number.
std::optional<Fixed> parse_fixed(std::string_view text, bool up, bool* exact);

}  // namespace ss
