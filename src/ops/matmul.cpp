#include "ops/matmul.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <vector>

#include "ops/interleave.h"
#include "ops/matmul_bf16.h"
#include "ops/matmul_int8.h"
#include "ops/matmul_kernels.h"

namespace ss {

namespace {
// Below this many multiply-adds per part, splitting costs more than it
// saves. The int8 / bf16 kernels do a multiply-add in a fraction of the float
// path's time, so a part needs more of them to pay for the fork-join: at 2
// threads, 1 << 16 left stories15M Q4_0 decode 8% slower than 1 << 17, and
// gpt-oss-tiny's slower than one thread (1 << 17 and 1 << 18 tie on both,
// and on Pythia-160M).
constexpr int64_t kMinFloatWorkPerPart = int64_t{1} << 16;
constexpr int64_t kMinReducedWorkPerPart = int64_t{1} << 17;

int parts_for(int64_t work, int64_t min_work_per_part, const ThreadPool& pool) {
  return static_cast<int>(std::clamp<int64_t>(work / min_work_per_part, 1, pool.size()));
}

// Reduced-precision paths over several matrices that share X: X rounded once
// by the caller, all their 16-row tiles in one parallel pass (one wait
// instead of one per matrix); rows(w, y, r0, r1) computes a range of one.
template <typename Rows>
void shared_pass(std::span<const MatmulOut> outs, int n, ThreadPool& pool, const Rows& rows) {
  const int64_t cols = outs[0].w->ne0;
  int64_t tiles = 0, work = 0;
  for (const auto& o : outs) {
    tiles += (o.w->ne1 + 15) / 16;
    work += o.w->ne1 * cols * n;
  }
  const int parts = parts_for(work, kMinReducedWorkPerPart, pool);
  // Tiles go out in chunks as threads become free, since per-core speeds
  // differ on a shared machine and a static split waits for the slowest.
  // Chunks shrink as the pass goes on (guided scheduling: each takes half of
  // what is left over the threads, at least four tiles), so few claims are
  // made, yet the thread that finishes first waits at most for a small last
  // chunk. One part takes everything in one claim. Chunks are whole fours of
  // tiles: decode's Q4_0/Q8_0 GEMVs read a range as four far-apart streams
  // (two under AVX2) and leave what does not divide to a one-stream tile,
  // and the AMX kernels take tiles in pairs. Chunks of whole pairs, halved
  // down to two even at one thread, had put 9% of Q8_0 decode's kernel time
  // into one-stream tiles (perf, TinyLlama, two threads, Zen 4 VM); whole
  // fours: none, and decode's share of the paired sweep (bench --bandwidth,
  // alternating runs) went 91-94% -> 92-98% at two threads (four runs) and
  // 93-95% -> 96-97% at one (three); Q4_0 and Q4_K_M stayed level.
  constexpr int64_t kClaimTiles = kVnniDecodeStreams;
  static_assert(kClaimTiles % kAvx2DecodeStreams == 0 && kClaimTiles % 2 == 0 && (kClaimTiles & (kClaimTiles - 1)) == 0,
                "whole ranges for every decode GEMV and the AMX tile pairs; a power of two for the rounding below");
  std::atomic<int64_t> next{0};
  auto claim = [&](int64_t& lo, int64_t& hi) {
    int64_t cur = next.load(std::memory_order_relaxed);
    for (;;) {
      if (cur >= tiles) return false;
      const int64_t size =
          parts == 1
              ? tiles
              : (std::max<int64_t>(kClaimTiles, (tiles - cur) / (2 * parts)) + kClaimTiles - 1) & ~(kClaimTiles - 1);
      if (next.compare_exchange_weak(cur, cur + size, std::memory_order_relaxed)) {
        lo = cur;
        hi = std::min(tiles, cur + size);
        return true;
      }
    }
  };
  pool.parallel_for(
      static_cast<size_t>(parts),
      [&](size_t, size_t) {
        for (int64_t lo, hi; claim(lo, hi);) {
          int64_t first = 0;  // the current matrix's first tile in the global order
          for (const auto& o : outs) {
            const int64_t t = (o.w->ne1 + 15) / 16, a = std::max(lo, first), b = std::min(hi, first + t);
            if (a < b) rows(*o.w, o.y, (a - first) * 16, std::min(o.w->ne1, (b - first) * 16));
            first += t;
          }
        }
      },
      parts);
}

bool all_supported(std::span<const MatmulOut> outs, bool (*supported)(const TensorView&)) {
  for (const auto& o : outs)
    if (!supported(*o.w) || o.w->ne0 != outs[0].w->ne0) return false;
  return true;
}

bool bf16_batch(int n, ActQuant aq) { return aq == ActQuant::Fast && n >= kBf16MinRows; }

// Runs the reduced-precision pass `aq` asks for, if every matrix has one.
bool reduced_precision(std::span<const MatmulOut> outs, const float* x, int n, ThreadPool& pool, ActQuant aq) {
  if (aq == ActQuant::None) return false;
  const int64_t cols = outs[0].w->ne0;
  // The workers must see the calling thread's buffers, not their own.
  if (bf16_batch(n, aq) && all_supported(outs, bf16_matmul_supported)) {
    thread_local Bf16Acts buffer;
    Bf16Acts& xb = buffer;
    pack_acts_bf16(x, n, cols, xb);
    shared_pass(outs, n, pool,
                [&](const TensorView& w, float* y, int64_t r0, int64_t r1) { matmul_bf16_rows(w, xb, y, r0, r1); });
    return true;
  }
  if (!all_supported(outs, int8_matmul_supported)) return false;
  thread_local QuantizedActs buffer;
  QuantizedActs& xq = buffer;
  quantize_acts(x, n, cols, xq, &pool);
  shared_pass(outs, n, pool,
              [&](const TensorView& w, float* y, int64_t r0, int64_t r1) { matmul_int8_rows(w, xq, y, r0, r1); });
  return true;
}
}  // namespace

MatmulKernel matmul_kernel(const TensorView& w, int n, ActQuant aq) {
  if (aq == ActQuant::None) return MatmulKernel::Float;
  if (bf16_batch(n, aq) && bf16_matmul_supported(w)) return MatmulKernel::Bf16Amx;
  if (!int8_matmul_supported(w)) return MatmulKernel::Float;
  if (int8_uses_amx(w, n)) return MatmulKernel::Int8Amx;
  const char* k = int8_kernels();
  if (std::strcmp(k, "avx2") == 0) return MatmulKernel::Int8Avx2;
  return std::strcmp(k, "avx-vnni") == 0 ? MatmulKernel::Int8AvxVnni : MatmulKernel::Int8Vnni;
}

const char* matmul_kernel_name(MatmulKernel k) {
  switch (k) {
    case MatmulKernel::Int8Vnni:
      return "int8-avx512-vnni";
    case MatmulKernel::Int8Avx2:
      return "int8-avx2";
    case MatmulKernel::Int8AvxVnni:
      return "int8-avx-vnni";
    case MatmulKernel::Int8Amx:
      return "int8-amx";
    case MatmulKernel::Bf16Amx:
      return "bf16-amx";
    case MatmulKernel::Float:
      break;
  }
  return "float";
}

void matmul_shared_input(std::span<const MatmulOut> outs, const float* x, int n, ThreadPool& pool, ActQuant aq) {
  if (outs.empty() || reduced_precision(outs, x, n, pool, aq)) return;
  for (const auto& o : outs) matmul(*o.w, x, n, o.y, pool, aq);
}

void matmul(const TensorView& w, const float* x, int n, float* y, ThreadPool& pool, ActQuant aq) {
  const MatmulOut one{&w, y};
  if (reduced_precision(std::span<const MatmulOut>(&one, 1), x, n, pool, aq)) return;
  const int parts = parts_for(w.ne0 * w.ne1 * n, kMinFloatWorkPerPart, pool);
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
