#pragma once
// Rotary position embedding. Angles are computed in double from an integer
// position, so a position of 10^7 or more is as exact as position 5.
#include <cstdint>
#include <vector>

#include "model/config.h"

namespace ss {

class RopeTable {
 public:
  RopeTable(int rope_dim, float base);
  int pairs() const { return static_cast<int>(inv_freq_.size()); }
  // cos/sin of pos * inv_freq[i] for each pair i (each array pairs() long).
  void angles(int64_t pos, float* cos_out, float* sin_out) const;

 private:
  std::vector<double> inv_freq_;
};

// Rotates n_heads heads of head_dim floats in place; only the first
// 2*pairs dims of each head are rotated.
void rope_apply(float* x, int n_heads, int head_dim, int pairs, const float* cos_v, const float* sin_v,
                RopeStyle style);

}  // namespace ss
