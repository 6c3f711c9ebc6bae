#pragma once
// Random weight matrices of any type for the matmul tests.
#include <random>
#include <vector>

#include "format/tensor.h"
#include "ops/interleave.h"

namespace ss::test {

// rows x cols uniform(-1, 1) values quantized to t; storage owns the bytes.
inline TensorView random_weights(GgmlType t, int rows, int cols, std::mt19937& rng, std::vector<uint8_t>& storage) {
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> wf(static_cast<size_t>(rows) * cols);
  for (auto& v : wf) v = u(rng);
  storage.assign(row_bytes(t, cols) * rows, 0);
  for (int r = 0; r < rows; ++r)
    quantize_row(t, wf.data() + static_cast<size_t>(r) * cols, storage.data() + r * row_bytes(t, cols), cols);
  TensorView w;
  w.type = t;
  w.ne0 = cols;
  w.ne1 = rows;
  w.data = storage.data();
  return w;
}

// W with its interleaved copy (ops/interleave.h) in `copy`, as the runtime
// lays it out for the int8 kernels.
inline TensorView interleaved_view(const TensorView& w, std::vector<uint8_t>& copy) {
  copy.assign(interleaved_bytes(w), 0);
  interleave(w, copy.data());
  TensorView iw = w;
  iw.interleaved = copy.data();
  return iw;
}

}  // namespace ss::test
