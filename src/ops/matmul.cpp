#include "ops/matmul.h"

#include <algorithm>
#include <cstring>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <vector>

#include "util/fp16.h"

namespace ss {

namespace {

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__)
#define SS_MATMUL_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define SS_MATMUL_CLONES
#endif

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx,f16c"))) void f16_row_to_f32_f16c(const uint16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m128i h;
    std::memcpy(&h, src + i, 16);
    const __m256 f = _mm256_cvtph_ps(h);
    _mm256_storeu_ps(dst + i, f);
  }
  for (; i < n; ++i) dst[i] = fp16_to_fp32(src[i]);
}
#endif

// F16 row to floats: the F16C instruction where the CPU has it (exact, like
// the scalar conversion it replaces).
void f16_row_to_f32(const uint16_t* src, float* dst, int64_t n) {
#if defined(__x86_64__) && defined(__GNUC__)
  static const bool has_f16c = __builtin_cpu_supports("f16c") && __builtin_cpu_supports("avx");
  if (has_f16c) return f16_row_to_f32_f16c(src, dst, n);
#endif
  for (int64_t i = 0; i < n; ++i) dst[i] = fp16_to_fp32(src[i]);
}

// Below this many multiply-adds per part, splitting costs more than it saves.
constexpr int64_t kMinWorkPerPart = 1 << 16;

SS_MATMUL_CLONES void matmul_rows(const TensorView& w, const float* x, int n, float* y, int64_t r0, int64_t r1) {
  const int64_t cols = w.ne0, rows = w.ne1;
  if (w.type == GgmlType::F32) {
    int64_t r = r0;
    // Four rows at a time share each load of x and one horizontal reduction pass.
    for (; r + 4 <= r1; r += 4) {
      const float* w0 = w.f32() + r * cols;
      for (int t = 0; t < n; ++t) {
        const float* xt = x + t * cols;
        float a0[8] = {}, a1[8] = {}, a2[8] = {}, a3[8] = {};
        int64_t k = 0;
        for (; k + 8 <= cols; k += 8)
          for (int j = 0; j < 8; ++j) {
            const float xv = xt[k + j];
            a0[j] += w0[k + j] * xv;
            a1[j] += w0[cols + k + j] * xv;
            a2[j] += w0[2 * cols + k + j] * xv;
            a3[j] += w0[3 * cols + k + j] * xv;
          }
        float s[4];
        float* accs[4] = {a0, a1, a2, a3};
        for (int q = 0; q < 4; ++q) {
          const float* a = accs[q];
          s[q] = ((a[0] + a[4]) + (a[1] + a[5])) + ((a[2] + a[6]) + (a[3] + a[7]));
          for (int64_t kk = k; kk < cols; ++kk) s[q] += w0[q * cols + kk] * xt[kk];
          y[t * rows + r + q] = s[q];
        }
      }
    }
    for (; r < r1; ++r) {
      const float* wr = w.f32() + r * cols;
      for (int t = 0; t < n; ++t) y[t * rows + r] = dot_f32(wr, x + t * cols, static_cast<int>(cols));
    }
    return;
  }
  thread_local std::vector<float> buf;
  buf.resize(static_cast<size_t>(cols));
  for (int64_t r = r0; r < r1; ++r) {
    if (w.type == GgmlType::F16)
      f16_row_to_f32(reinterpret_cast<const uint16_t*>(w.row(r)), buf.data(), cols);
    else
      dequantize_row(w.type, w.row(r), buf.data(), cols);
    for (int t = 0; t < n; ++t) y[t * rows + r] = dot_f32(buf.data(), x + t * cols, static_cast<int>(cols));
  }
}
}  // namespace

void matmul(const TensorView& w, const float* x, int n, float* y, ThreadPool& pool) {
  const int64_t work = w.ne0 * w.ne1 * n;
  const int parts = static_cast<int>(std::clamp<int64_t>(work / kMinWorkPerPart, 1, pool.size()));
  if (parts == 1) {
    matmul_rows(w, x, n, y, 0, w.ne1);
    return;
  }
  pool.parallel_for(
      static_cast<size_t>(w.ne1),
      [&](size_t b, size_t e) { matmul_rows(w, x, n, y, static_cast<int64_t>(b), static_cast<int64_t>(e)); }, parts);
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
  dequantize_row(table.type, table.row(row), out, table.ne0);
}

}  // namespace ss
