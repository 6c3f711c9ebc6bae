#pragma once
// How the int8 batch kernels walk activation rows: in groups their tiles take
// whole (the tile's row count is a template parameter, so each group size is
// its own instantiation).
#include <type_traits>

namespace ss {

// Activation rows [0, n) in groups the tile kernels take whole: f(t,
// std::integral_constant<int, NT>) for rows [t, t + NT), NT = kWide (8 or 4)
// while that many are left, then 4, then one call for the last 1-3.
template <int kWide = 4, typename F>
void for_act_groups(int n, F&& f) {
  int t = 0;
  if constexpr (kWide > 4)
    for (; t + kWide <= n; t += kWide) f(t, std::integral_constant<int, kWide>{});
  for (; t + 4 <= n; t += 4) f(t, std::integral_constant<int, 4>{});
  switch (n - t) {
    case 3:
      f(t, std::integral_constant<int, 3>{});
      break;
    case 2:
      f(t, std::integral_constant<int, 2>{});
      break;
    case 1:
      f(t, std::integral_constant<int, 1>{});
      break;
    default:
      break;
  }
}

}  // namespace ss
