#include "ops/matmul.h"

#include <algorithm>
#include <vector>

#include "ops/matmul_int8.h"
#include "ops/matmul_kernels.h"

namespace ss {

namespace {
// Below this many multiply-adds per part, splitting costs more than it saves.
constexpr int64_t kMinWorkPerPart = 1 << 16;
}  // namespace

void matmul(const TensorView& w, const float* x, int n, float* y, ThreadPool& pool, ActQuant aq) {
  const int64_t work = w.ne0 * w.ne1 * n;
  const int parts = static_cast<int>(std::clamp<int64_t>(work / kMinWorkPerPart, 1, pool.size()));
  if (aq == ActQuant::Int8 && int8_matmul_supported(w)) {
    thread_local QuantizedActs buffer;
    QuantizedActs& xq = buffer;  // the workers must see this thread's buffer, not their own
    quantize_acts(x, n, w.ne0, xq);
    // Row ranges in multiples of 16: the AMX kernel's tile height.
    const size_t groups = static_cast<size_t>((w.ne1 + 15) / 16);
    pool.parallel_for(
        groups,
        [&](size_t b, size_t e) {
          matmul_int8_rows(w, xq, y, static_cast<int64_t>(b) * 16,
                           std::min<int64_t>(static_cast<int64_t>(e) * 16, w.ne1));
        },
        parts);
    return;
  }
  if (parts == 1) {
    matmul_rows_simd(w, x, n, y, 0, w.ne1);
    return;
  }
  // Row ranges in multiples of 8 keep every part on the full-width tiles.
  const size_t groups = static_cast<size_t>((w.ne1 + 7) / 8);
  pool.parallel_for(
      groups,
      [&](size_t b, size_t e) {
        matmul_rows_simd(w, x, n, y, static_cast<int64_t>(b) * 8,
                         std::min<int64_t>(static_cast<int64_t>(e) * 8, w.ne1));
      },
      parts);
}

void matmul_reference(const TensorView& w, const float* x, int n, float* y) {
  std::vector<float> row(static_cast<size_t>(w.ne0));
  for (int64_t r = 0; r < w.ne1; ++r) {
    dequantize_row(w.type, w.row(r), row.data(), w.ne0);
    for (int t = 0; t < n; ++t) {
      double s = 0;
      for (int64_t c = 0; c < w.ne0; ++c) s += static_cast<double>(row[c]) * x[t * w.ne0 + c];
      y[t * w.ne1 + r] = static_cast<float>(s);
    }
  }
}

void embedding_row(const TensorView& table, int64_t row, float* out) {
  dequantize_row_simd(table.type, table.row(row), out, table.ne0);
}

}  // namespace ss
