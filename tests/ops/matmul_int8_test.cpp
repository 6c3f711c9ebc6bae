// Int8-activation matmul: activation rounding within its bound, the SIMD
// kernels (AVX-512 VNNI, AMX tiles, AVX2, AVX-VNNI) against their scalar twin at odd sizes,
// and the whole path against the exact float path within the error the
// activation rounding can cause.
#include "ops/matmul_int8.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "cpu_levels.h"
#include "format/ggml_types.h"
#include "ops/interleave.h"
#include "ops/matmul.h"
#include "ops/matmul_bf16.h"
#include "ops/matmul_int8_decoded.h"
#include "random_weights.h"
#include "util/cpu_features.h"
#include "util/fp16.h"

namespace ss {
namespace {

using test::interleaved_view;
using test::random_weights;

TEST(Int8Matmul, ActivationRoundingStaysWithinHalfAStep) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-3, 3);
  const int n = 3, cols = 96;
  std::vector<float> x(n * cols);
  for (auto& v : x) v = u(rng);
  for (int i = 0; i < 32; ++i) x[32 + i] = 0;  // an all-zero block: d = 0, q = 0
  QuantizedActs xq;
  quantize_acts(x.data(), n, cols, xq);
  ASSERT_EQ(xq.blocks(), 3);
  for (int t = 0; t < n; ++t)
    for (int b = 0; b < 3; ++b) {
      const float d = xq.d[t * 3 + b];
      float amax = 0;
      int32_t sum = 0;
      for (int i = 0; i < 32; ++i) {
        const int idx = t * cols + b * 32 + i;
        amax = std::max(amax, std::fabs(x[idx]));
        EXPECT_LE(std::fabs(xq.q[idx] * d - x[idx]), d * 0.5f + 1e-6f);
        EXPECT_LE(std::abs(static_cast<int>(xq.q[idx])), 127);
        sum += xq.q[idx];
      }
      EXPECT_FLOAT_EQ(d, amax / 127.0f);
      EXPECT_EQ(xq.sum[t * 3 + b], sum);
    }
}

// Activations round to the same q, d and sums at every dispatch level (VNNI,
// AVX2 and scalar rounding), ties included: results and golden NLLs do not
// depend on which rounding ran.
TEST(Int8Matmul, ActivationRoundingIsTheSameAtEveryLevel) {
  std::mt19937 rng(13);
  std::uniform_real_distribution<float> u(-3, 3);
  const int n = 5, cols = 160;
  std::vector<float> x(n * cols);
  for (auto& v : x) v = u(rng);
  for (int i = 0; i < 32; ++i) x[32 + i] = 0;                                                 // d = 0
  for (int i = 0; i < 32; ++i) x[64 + i] = i == 5 ? -127.0f : static_cast<float>(i) - 15.5f;  // d = 1: ties
  for (int i = 0; i < 32; ++i) x[96 + i] = i % 2 ? 1e-30f : -2e-30f;                          // tiny
  std::vector<QuantizedActs> per_level;
  std::vector<std::string> names;
  for (CpuLevel level : cpu_levels_to_test()) {
    ScopedCpuCap cap(level);
    per_level.emplace_back();
    quantize_acts(x.data(), n, cols, per_level.back());
    names.push_back(cpu_level_name(level));
  }
  for (size_t i = 1; i < per_level.size(); ++i) {
    EXPECT_EQ(per_level[i].q, per_level[0].q) << names[i] << " vs " << names[0];
    EXPECT_EQ(per_level[i].d, per_level[0].d) << names[i] << " vs " << names[0];
    EXPECT_EQ(per_level[i].sum, per_level[0].sum) << names[i] << " vs " << names[0];
    EXPECT_EQ(per_level[i].sum16, per_level[0].sum16) << names[i] << " vs " << names[0];
  }
}

// Every int8 kernel this CPU has (each dispatch level in turn: AMX tiles,
// VNNI alone, AVX2 for Q4_0/Q8_0), one and two threads, against the twin; and
// against the exact float path within sum_i |w_i| * d_x / 2 per block.
// Levels and types without an int8 kernel (K-quants under AVX2, SSE4) take
// the float path, checked the same way.
TEST(Int8Matmul, KernelsMatchScalarTwinAndExactPathWithinRoundingBound) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1, 1);
  bool any = false;
  ThreadPool pool1(1), pool2(2);
  const std::pair<GgmlType, std::vector<int>> cases[] = {{GgmlType::Q4_0, {32, 96, 320, 2048}},
                                                         {GgmlType::Q8_0, {32, 96, 320, 2048}},
                                                         {GgmlType::Q4_K, {256, 768, 2048}},
                                                         {GgmlType::Q5_K, {256, 768, 2048}},
                                                         {GgmlType::Q6_K, {256, 768, 2048}}};
  for (const auto& [t, col_list] : cases) {
    for (int cols : col_list) {
      for (int rows : {1, 5, 17, 67}) {
        std::vector<uint8_t> storage;
        const TensorView w = random_weights(t, rows, cols, rng, storage);
        for (int n : {1, 2, 3, 4, 5, 9, 16, 17, 33, 65}) {
          std::vector<float> x(static_cast<size_t>(n) * cols);
          for (auto& v : x) v = u(rng);
          QuantizedActs xq;
          quantize_acts(x.data(), n, cols, xq);
          std::vector<float> twin(static_cast<size_t>(n) * rows), exact(twin.size()), bound(twin.size(), 0.0f);
          matmul_int8_reference(w, xq, twin.data());
          matmul_reference(w, x.data(), n, exact.data());
          std::vector<float> wrow(static_cast<size_t>(cols));
          std::vector<float> scale(twin.size(), 0.0f);  // sum of |terms|: the float rounding scale
          for (int r = 0; r < rows; ++r) {
            dequantize_row(t, w.row(r), wrow.data(), cols);
            for (int k = 0; k < n; ++k)
              for (int i = 0; i < cols; ++i) {
                const size_t o = static_cast<size_t>(k) * rows + r;
                bound[o] += std::fabs(wrow[i]) * xq.d[static_cast<size_t>(k * (cols / 32) + i / 32)] * 0.5f;
                scale[o] += std::fabs(wrow[i] * x[static_cast<size_t>(k) * cols + i]);
              }
          }
          for (CpuLevel level : cpu_levels_to_test()) {
            ScopedCpuCap cap(level);
            const MatmulKernel kernel = matmul_kernel(w, n, ActQuant::Int8);
            any = any || kernel != MatmulKernel::Float;
            for (ThreadPool* pool : {&pool1, &pool2}) {
              std::vector<float> y(twin.size(), NAN);
              matmul(w, x.data(), n, y.data(), *pool, ActQuant::Int8);
              for (size_t o = 0; o < y.size(); ++o) {
                if (kernel == MatmulKernel::Float) {  // exact path: within float rounding of the reference
                  ASSERT_NEAR(y[o], exact[o], 2e-6f * scale[o] + 1e-6f)
                      << cpu_level_name(level) << " " << type_name(static_cast<uint32_t>(t)) << " out=" << o;
                  continue;
                }
                ASSERT_NEAR(y[o], twin[o], 2e-6f * (scale[o] + bound[o]) + 1e-6f)
                    << type_name(static_cast<uint32_t>(t)) << " cols=" << cols << " rows=" << rows << " n=" << n << " "
                    << matmul_kernel_name(kernel) << " out=" << o;
                ASSERT_LE(std::fabs(y[o] - exact[o]), bound[o] * 1.0001f + 1e-4f * scale[o] + 1e-6f)
                    << type_name(static_cast<uint32_t>(t)) << " cols=" << cols << " n=" << n << " out=" << o;
              }
            }
          }
        }
      }
    }
  }
  std::printf("int8 kernels: %s\n", int8_kernels());
  if (!any) std::printf("no int8 kernel at any level this CPU and cap allow: the float path was checked\n");
}

// Q4_0, Q8_0, Q4_K, Q5_K and Q6_K read from their interleaved copies (the layout decode uses),
// at every dispatch level: each int8 kernel against the twin on the plain rows,
// within float rounding (2e-6 of the sum of |terms|), and Fast batches
// within that bound (int8 kernels) or bf16 rounding. Bit-equality with the
// plain layout only where matmul.h promises it: the AMX tile paths (int8
// and bf16), which transpose its blocks back to rows. VNNI and AVX2 sum the
// interleaved blocks in another order, so there they may differ in the last
// bit. (AVX2 reads K-quants only interleaved: plain K-quant rows take the
// float path there.)
void interleaved_matches_twin_and_plain(GgmlType type, std::initializer_list<int> col_counts) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-1, 1);
  ThreadPool pool1(1), pool2(2);
  for (int cols : col_counts) {
    // 144 rows: nine groups, so one thread's first claim (four groups)
    // takes decode's four-stream tile.
    for (int rows : {16, 48, 80, 144}) {
      std::vector<uint8_t> storage;
      const TensorView w = random_weights(type, rows, cols, rng, storage);
      std::vector<uint8_t> copy;
      const TensorView iw = interleaved_view(w, copy);
      if (!int8_matmul_supported(iw)) GTEST_SKIP() << "no int8 kernel on this CPU and cap";
      for (int n : {1, 2, 3, 4, 5, 9, 17, 33, decoded_batch_min_rows(type) + 1, 65}) {
        std::vector<float> x(static_cast<size_t>(n) * cols);
        for (auto& v : x) v = u(rng);
        QuantizedActs xq;
        quantize_acts(x.data(), n, cols, xq);
        std::vector<float> twin(static_cast<size_t>(n) * rows), scale(twin.size(), 0.0f);
        matmul_int8_reference(w, xq, twin.data());
        std::vector<float> wrow(static_cast<size_t>(cols));
        for (int r = 0; r < rows; ++r) {
          dequantize_row(type, w.row(r), wrow.data(), cols);
          for (int k = 0; k < n; ++k)
            for (int i = 0; i < cols; ++i)
              scale[static_cast<size_t>(k) * rows + r] += std::fabs(wrow[i] * x[static_cast<size_t>(k) * cols + i]);
        }
        for (CpuLevel level : cpu_levels_to_test()) {
          ScopedCpuCap cap(level);
          if (!int8_matmul_supported(iw)) continue;  // no int8 kernel at this level
          const bool plain_int8 = int8_matmul_supported(w);
          for (ActQuant aq : {ActQuant::Int8, ActQuant::Fast}) {
            const MatmulKernel kernel = matmul_kernel(iw, n, aq);
            std::vector<float> one_thread;
            for (ThreadPool* pool : {&pool1, &pool2}) {
              std::vector<float> y(twin.size(), NAN), plain(twin.size(), NAN);
              matmul(iw, x.data(), n, y.data(), *pool, aq);
              // Every kernel: the same bits for any thread count (matmul.h),
              // though threads split the groups differently.
              if (pool == &pool1)
                one_thread = y;
              else
                EXPECT_EQ(y, one_thread) << "two threads, n=" << n << " rows=" << rows;
              matmul(w, x.data(), n, plain.data(), *pool, aq);
              const std::string what = std::string(matmul_kernel_name(kernel)) + " cols=" + std::to_string(cols) +
                                       " rows=" + std::to_string(rows) + " n=" + std::to_string(n);
              if (kernel == MatmulKernel::Bf16Amx) {
                std::vector<float> ref(twin.size());
                matmul_bf16_reference(w, x.data(), n, ref.data());
                for (size_t o = 0; o < y.size(); ++o)  // the bound of matmul_bf16_test.cpp
                  ASSERT_NEAR(y[o], ref[o], static_cast<float>(cols) * 0x1p-23f * scale[o] * 1.01f + 1e-30f)
                      << what << " out=" << o;
              } else {
                ASSERT_NE(kernel, MatmulKernel::Float) << what;
                for (size_t o = 0; o < y.size(); ++o) {
                  ASSERT_NEAR(y[o], twin[o], 2e-6f * scale[o] + 1e-6f) << what << " out=" << o;
                  if (plain_int8) {
                    ASSERT_NEAR(plain[o], twin[o], 2e-6f * scale[o] + 1e-6f) << what << " plain out=" << o;
                  }
                }
              }
              if (kernel == MatmulKernel::Int8Amx || kernel == MatmulKernel::Bf16Amx) {
                EXPECT_EQ(y, plain) << what;
              }
              if (!plain_int8) {  // the float path on the plain rows: the exact reference
                std::vector<float> exact(twin.size(), NAN);
                matmul(w, x.data(), n, exact.data(), *pool, ActQuant::None);
                EXPECT_EQ(plain, exact) << what;
              }
            }
          }
        }
      }
    }
  }
}

TEST(Int8Matmul, InterleavedQ4_0MatchesTwinAndPlainLayout) {
  interleaved_matches_twin_and_plain(GgmlType::Q4_0, {32, 96, 800, 2048});
}

TEST(Int8Matmul, InterleavedQ4_KMatchesTwinAndPlainLayout) {
  interleaved_matches_twin_and_plain(GgmlType::Q4_K, {256, 768, 2048});
}

TEST(Int8Matmul, InterleavedQ8_0MatchesTwinAndPlainLayout) {
  interleaved_matches_twin_and_plain(GgmlType::Q8_0, {32, 96, 800, 2048});
}

TEST(Int8Matmul, InterleavedQ5_KMatchesTwinAndPlainLayout) {
  interleaved_matches_twin_and_plain(GgmlType::Q5_K, {256, 768, 2048});
}

TEST(Int8Matmul, InterleavedQ6_KMatchesTwinAndPlainLayout) {
  interleaved_matches_twin_and_plain(GgmlType::Q6_K, {256, 768, 2048});
}

// matmul.h promises the same bits for any thread count, and threads claim
// row ranges of any size: a group's rows must not depend on the range it is
// computed in (decode reads a range's halves or quarters side by side,
// batches adjacent groups, left-over groups go alone). Every row split of seven groups against the whole,
// at every level with an interleaved int8 kernel, for decode and batch
// row counts.
TEST(Int8Matmul, InterleavedRowsAreTheSameBitsInAnyRowRange) {
  std::mt19937 rng(29);
  std::uniform_real_distribution<float> u(-1, 1);
  const int rows = 7 * 16;
  for (GgmlType type : {GgmlType::Q4_0, GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K}) {
    const int cols = 512;
    std::vector<uint8_t> storage, copy;
    const TensorView w = random_weights(type, rows, cols, rng, storage);
    const TensorView iw = interleaved_view(w, copy);
    for (CpuLevel level : cpu_levels_to_test()) {
      ScopedCpuCap cap(level);
      if (!int8_matmul_supported(iw) || int8_layout(iw) != Int8Layout::Interleaved) continue;
      for (int n : {1, 2, 3, 4, 5, decoded_batch_min_rows(type) + 1, 65}) {
        std::vector<float> x(static_cast<size_t>(n) * cols);
        for (auto& v : x) v = u(rng);
        QuantizedActs xq;
        quantize_acts(x.data(), n, cols, xq);
        std::vector<float> whole(static_cast<size_t>(n) * rows, NAN);
        matmul_int8_rows(iw, xq, whole.data(), 0, rows);
        for (int first : {1, 2, 3}) {
          for (int second : {1, 2, 4}) {
            if (first + second > 7) continue;
            const int cuts[] = {0, 16 * first, 16 * (first + second), rows};
            std::vector<float> parts(whole.size(), NAN);
            for (int c = 0; c < 3; ++c) matmul_int8_rows(iw, xq, parts.data(), cuts[c], cuts[c + 1]);
            EXPECT_EQ(parts, whole) << type_name(static_cast<uint32_t>(type)) << " n=" << n << " groups " << first
                                    << "+" << second << "+" << (7 - first - second) << " level "
                                    << static_cast<int>(level);
          }
        }
      }
    }
  }
}

// The AMX kernel's int8 A tiles, scales and mins (int8_tile_rows) come out
// the same from W's interleaved groups as from its plain rows, bit for bit
// (what lets interleaved and plain matrices give the same AMX sums), and
// scale * q - min is the dequantized weight. Runs wherever AVX-512 VNNI is
// (the tile unit itself is not needed), so machines without AMX check what
// the AMX ones read.
TEST(Int8Matmul, AmxTilesFromInterleavedGroupsEqualTilesFromPlainRows) {
  if (!cpu_usable(kCpuAvx512Vnni)) GTEST_SKIP() << "no AVX-512 VNNI on this CPU and cap";
  std::mt19937 rng(5);
  for (GgmlType type : {GgmlType::Q4_0, GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q5_K}) {
    const bool k45 = type == GgmlType::Q4_K || type == GgmlType::Q5_K;
    const std::vector<int> col_counts = k45 ? std::vector<int>{256, 768, 2560} : std::vector<int>{32, 96, 800};
    for (int cols : col_counts) {
      constexpr int kRows = 48;
      std::vector<uint8_t> storage;
      const TensorView w = random_weights(type, kRows, cols, rng, storage);
      std::vector<uint8_t> copy;
      const TensorView iw = interleaved_view(w, copy);
      ASSERT_TRUE(tiles_read_interleaved(iw));
      const size_t nb = static_cast<size_t>(cols / 32);
      std::vector<float> wrow(static_cast<size_t>(cols));
      // A whole group, and a strip cut short by the end of a range (rows
      // past it zero: there the interleaved view falls back to plain rows).
      for (auto [rt, end] : {std::pair{0, kRows}, std::pair{16, kRows}, std::pair{32, kRows}, std::pair{16, 25}}) {
        std::vector<int8_t> q_plain(nb * 512, 7), q_il(nb * 512, 9);
        std::vector<float> d_plain(nb * 16, -1), d_il(nb * 16, -2), m_plain(nb * 16, 0), m_il(nb * 16, 0);
        int8_tile_rows(w, rt, end, q_plain.data(), d_plain.data(), m_plain.data());
        int8_tile_rows(iw, rt, end, q_il.data(), d_il.data(), m_il.data());
        const std::string what = std::string(type_name(static_cast<uint32_t>(type))) + " cols=" + std::to_string(cols) +
                                 " rt=" + std::to_string(rt);
        ASSERT_EQ(q_il, q_plain) << what;
        ASSERT_EQ(d_il, d_plain) << what;
        if (k45) {
          ASSERT_EQ(m_il, m_plain) << what;
        }
        // A range of blocks (as the AMX kernel decodes a chunk at a time,
        // K-quants from a super-block) is that range of the whole row's.
        const size_t step = k45 ? 8 : 3;
        for (size_t b0 = 0; b0 < nb; b0 += step)
          for (const TensorView* v : {&w, &iw}) {
            const size_t count = std::min(step, nb - b0);
            std::vector<int8_t> q(count * 512, 5);
            std::vector<float> d(count * 16, -3), mn(count * 16, 0);
            int8_tile_rows(*v, rt, end, q.data(), d.data(), mn.data(), static_cast<int64_t>(b0),
                           static_cast<int64_t>(count));
            ASSERT_TRUE(std::equal(q.begin(), q.end(), q_plain.begin() + static_cast<std::ptrdiff_t>(b0 * 512)))
                << what << " b0=" << b0;
            ASSERT_TRUE(std::equal(d.begin(), d.end(), d_plain.begin() + static_cast<std::ptrdiff_t>(b0 * 16)))
                << what << " b0=" << b0;
            if (k45) {
              ASSERT_TRUE(std::equal(mn.begin(), mn.end(), m_plain.begin() + static_cast<std::ptrdiff_t>(b0 * 16)))
                  << what << " b0=" << b0;
            }
          }
        for (int m = 0; m < 16; ++m) {
          if (rt + m >= end) {
            for (size_t b = 0; b < nb; ++b) ASSERT_EQ(d_il[b * 16 + m], 0.0f) << what;
            continue;
          }
          dequantize_row(type, w.row(rt + m), wrow.data(), cols);
          for (size_t b = 0; b < nb; ++b)
            for (int i = 0; i < 32; ++i) {
              const float v = d_il[b * 16 + m] * q_il[b * 512 + m * 32 + i] - (k45 ? m_il[b * 16 + m] : 0.0f);
              ASSERT_NEAR(v, wrow[b * 32 + i], 1e-6f * (std::fabs(wrow[b * 32 + i]) + 1)) << what << " m=" << m;
            }
        }
      }
    }
  }
}

// Every int8 kernel that reads `view` (W itself or W with its interleaved
// copy), at every dispatch level, equals the twin on W's plain rows within
// float rounding for the n activation rows x.
void expect_kernels_match_twin(const TensorView& w, const TensorView& view, const std::vector<float>& x, int n) {
  const int64_t cols = w.ne0, rows = w.ne1;
  const GgmlType t = w.type;
  QuantizedActs xq;
  quantize_acts(x.data(), n, cols, xq);
  std::vector<float> twin(static_cast<size_t>(n * rows)), scale(twin.size(), 0.0f), wrow(static_cast<size_t>(cols));
  matmul_int8_reference(w, xq, twin.data());
  for (int64_t r = 0; r < rows; ++r) {
    dequantize_row(t, w.row(r), wrow.data(), cols);
    for (int k = 0; k < n; ++k)
      for (int64_t i = 0; i < cols; ++i) scale[k * rows + r] += std::fabs(wrow[i] * x[k * cols + i]);
  }
  ThreadPool pool(1);
  ss::test::at_every_cpu_level([&] {
    if (!int8_matmul_supported(view)) return;
    std::vector<float> y(twin.size(), NAN);
    matmul(view, x.data(), n, y.data(), pool, ActQuant::Int8);
    for (size_t o = 0; o < y.size(); ++o)
      ASSERT_NEAR(y[o], twin[o], 2e-6f * scale[o] + 1e-6f)
          << type_name(static_cast<uint32_t>(t)) << " n=" << n << " out=" << o << " "
          << matmul_kernel_name(matmul_kernel(view, n, ActQuant::Int8));
  });
}

// Blocks at the ends of their ranges: Q8_0 weights -128 and 127, Q4_0
// nibbles 0 and 15, against activations at +-127 of the same and the opposite
// sign. The AVX2 kernel multiplies byte pairs into int16 (vpmaddubsw, which
// saturates): each block's integer dot must still be exact, so every kernel
// equals the twin within float rounding.
TEST(Int8Matmul, ExtremeBlocksAreExactOnEveryKernel) {
  constexpr int kCols = 96, kRows = 7;
  for (GgmlType t : {GgmlType::Q8_0, GgmlType::Q4_0}) {
    const size_t rb = row_bytes(t, kCols);
    std::vector<uint8_t> storage(rb * kRows);
    TensorView w;
    w.type = t;
    w.ne0 = kCols;
    w.ne1 = kRows;
    w.data = storage.data();
    for (int r = 0; r < kRows; ++r)
      for (int b = 0; b < kCols / 32; ++b) {
        uint8_t* blk = storage.data() + r * rb + b * (t == GgmlType::Q8_0 ? 34 : 18);
        const uint16_t d = fp32_to_fp16(0.5f + 0.25f * r);
        std::memcpy(blk, &d, 2);
        for (int i = 0; i < (t == GgmlType::Q8_0 ? 32 : 16); ++i) {
          const bool low = (r + b + i / 8) % 2 == 0;  // runs of 8 at one end, then the other
          blk[2 + i] = t == GgmlType::Q8_0 ? static_cast<uint8_t>(low ? -128 : 127) : (low ? 0x00 : 0xFF);
        }
      }
    for (int n : {1, 2, 3, 4, 5, 33}) {
      std::vector<float> x(static_cast<size_t>(n) * kCols);
      for (int k = 0; k < n; ++k)
        for (int i = 0; i < kCols; ++i) x[k * kCols + i] = ((i / 8 + k) % 2 ? 1.0f : -1.0f) * (k + 1);
      expect_kernels_match_twin(w, w, x, n);
    }
  }
}

// The same at the ends of every interleaved type's range, read through its
// interleaved copy: rows alternate between all-zero and all-one quant bytes
// (Q8_0: -128 and 127; the K-quants' 6-bit scales and mins at 63, Q6_K's int8
// scales at 127), against activation rows of one sign throughout (the
// longest runs of the largest products: the AVX2 kernels add vpmaddubsw
// pairs in int16 over several chunks) and of alternating sign.
TEST(Int8Matmul, ExtremeInterleavedBlocksAreExactOnEveryKernel) {
  constexpr int kCols = 512, kRows = 32;
  for (GgmlType t : {GgmlType::Q4_0, GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K}) {
    const auto traits = type_traits(static_cast<uint32_t>(t));
    const int64_t per_row = kCols / traits->block_elems;
    const size_t bb = traits->block_bytes, rb = row_bytes(t, kCols);
    std::vector<uint8_t> storage(rb * kRows);
    for (int r = 0; r < kRows; ++r)
      for (int64_t b = 0; b < per_row; ++b) {
        uint8_t* blk = storage.data() + r * rb + b * bb;
        const bool high = (r + b) % 2 == 1;
        std::memset(blk, high ? 0xFF : 0x00, bb);
        const uint16_t d = fp32_to_fp16(0.01f + 0.001f * r), dmin = fp32_to_fp16(0.005f);
        switch (t) {
          case GgmlType::Q8_0:
            std::memset(blk + 2, high ? 0x7F : 0x80, 32);
            std::memcpy(blk, &d, 2);
            break;
          case GgmlType::Q4_K:
          case GgmlType::Q5_K:
            std::memcpy(blk, &d, 2);
            std::memcpy(blk + 2, &dmin, 2);
            std::memset(blk + 4, 0xFF, 12);
            break;
          case GgmlType::Q6_K:
            std::memset(blk + 192, 127, 16);
            std::memcpy(blk + 208, &d, 2);
            break;
          default:  // Q4_0
            std::memcpy(blk, &d, 2);
            break;
        }
      }
    TensorView w;
    w.type = t;
    w.ne0 = kCols;
    w.ne1 = kRows;
    w.data = storage.data();
    ASSERT_TRUE(can_interleave(w));
    std::vector<uint8_t> copy;
    const TensorView iw = interleaved_view(w, copy);
    // Batches from decoded_batch_min_rows on unpack each group once
    // (ops/matmul_int8_decoded.h), up to 63 per unsigned weight byte.
    for (int n : {1, 2, 3, 4, 5, decoded_batch_min_rows(t) + 1, 65}) {
      std::vector<float> x(static_cast<size_t>(n) * kCols);
      for (int k = 0; k < n; ++k)
        for (int i = 0; i < kCols; ++i) x[k * kCols + i] = (k % 2 == 0 || (i / 8) % 2 ? 1.0f : -1.0f) * (k + 1);
      expect_kernels_match_twin(w, iw, x, n);
    }
  }
}

// AVX-VNNI runs the AVX2 tiles with vpdpbusd in place of vpmaddubsw +
// vpmaddwd: both sum each block exactly and scale in the same order, so
// matmul.h promises the same bits. Every type the tiles read, plain rows and
// interleaved, decode and batch sizes, one and two threads.
TEST(Int8Matmul, AvxVnniTilesAreTheSameBitsAsAvx2) {
  if (!(cpu_detected() & kCpuAvxVnni) || cpu_cap() < CpuLevel::AvxVnni)
    GTEST_SKIP() << "no AVX-VNNI on this CPU (or capped below it): " << cpu_feature_names(cpu_usable());
  std::mt19937 rng(23);
  std::uniform_real_distribution<float> u(-1, 1);
  ThreadPool pool1(1), pool2(2);
  int compared = 0;
  for (GgmlType t : {GgmlType::Q4_0, GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K}) {
    std::vector<uint8_t> storage, copy;
    const TensorView w = random_weights(t, 48, 512, rng, storage);
    const TensorView iw = interleaved_view(w, copy);
    for (const TensorView* view : {&w, &iw}) {
      for (int n : {1, 2, 3, 4, 5, 9, 17, 33, 65}) {
        std::vector<float> x(static_cast<size_t>(n) * w.ne0);
        for (auto& v : x) v = u(rng) * (1 + n % 3);
        std::vector<float> y[2];
        for (int level = 0; level < 2; ++level) {
          ScopedCpuCap cap(level == 0 ? CpuLevel::Avx2 : CpuLevel::AvxVnni);
          if (!int8_matmul_supported(*view)) break;  // plain K-quant rows: the float path at both
          ASSERT_EQ(matmul_kernel(*view, n, ActQuant::Int8),
                    level == 0 ? MatmulKernel::Int8Avx2 : MatmulKernel::Int8AvxVnni);
          for (ThreadPool* pool : {&pool1, &pool2}) {
            std::vector<float> out(static_cast<size_t>(n) * w.ne1, NAN);
            matmul(*view, x.data(), n, out.data(), *pool, ActQuant::Int8);
            if (pool == &pool1) y[level] = out;
            ASSERT_EQ(0, std::memcmp(out.data(), y[level].data(), out.size() * sizeof(float)));
          }
        }
        if (y[1].empty()) continue;
        ASSERT_EQ(0, std::memcmp(y[0].data(), y[1].data(), y[0].size() * sizeof(float)))
            << type_name(static_cast<uint32_t>(t)) << (view == &iw ? " interleaved" : " plain") << " n=" << n;
        ++compared;
      }
    }
  }
  EXPECT_EQ(compared, 9 * 7);  // nine row counts; Q4_0 and Q8_0 both layouts, the K-quants interleaved
}

// Matrices sharing one input in one pass (q/k/v, gate/up) give exactly what
// each gives alone (matmul.h promises it for every int8 kernel), decode and
// batch, one and two threads, on each int8 kernel this CPU has.
TEST(Int8Matmul, SharedInputPassEqualsSeparateMatmuls) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1, 1);
  ThreadPool pool1(1), pool2(2);
  std::vector<uint8_t> s0, s1, s2, s3;
  // Q4_K beside Q4_0: one set of activations, types whose batches change
  // kernel at different row counts (amx_min_rows).
  constexpr int kMats = 4;
  const TensorView w[kMats] = {
      random_weights(GgmlType::Q4_0, 67, 256, rng, s0), random_weights(GgmlType::Q8_0, 5, 256, rng, s1),
      random_weights(GgmlType::Q4_0, 130, 256, rng, s2), random_weights(GgmlType::Q4_K, 33, 256, rng, s3)};
  if (!int8_matmul_supported(w[0])) GTEST_SKIP() << "no int8 kernel on this CPU and cap";
  for (CpuLevel level : cpu_levels_to_test()) {  // every int8 kernel (AMX, VNNI) this CPU has
    ScopedCpuCap cap(level);
    if (!int8_matmul_supported(w[0])) break;
    for (int n : {1, 3, 9, 33, 65}) {
      std::vector<float> x(static_cast<size_t>(n) * 256);
      for (auto& v : x) v = u(rng);
      for (ThreadPool* pool : {&pool1, &pool2}) {
        std::vector<float> alone[kMats], shared[kMats];
        MatmulOut outs[kMats];
        for (int i = 0; i < kMats; ++i) {
          alone[i].assign(static_cast<size_t>(n * w[i].ne1), NAN);
          shared[i].assign(alone[i].size(), NAN);
          matmul(w[i], x.data(), n, alone[i].data(), *pool, ActQuant::Int8);
          outs[i] = {&w[i], shared[i].data()};
        }
        matmul_shared_input(outs, x.data(), n, *pool, ActQuant::Int8);
        for (int i = 0; i < kMats; ++i)
          EXPECT_EQ(alone[i], shared[i]) << matmul_kernel_name(matmul_kernel(w[i], n, ActQuant::Int8)) << " matrix "
                                         << i << " n=" << n;
      }
    }
  }
}

// Types without int8/bf16 kernels give the exact float results under every
// mode, decode and batch.
TEST(Int8Matmul, OtherTypesStayOnTheFloatPath) {
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> u(-1, 1);
  ThreadPool pool(1);
  for (GgmlType t : {GgmlType::F32, GgmlType::F16}) {
    std::vector<uint8_t> storage;
    const TensorView w = random_weights(t, 9, 256, rng, storage);
    EXPECT_FALSE(int8_matmul_supported(w));
    EXPECT_FALSE(bf16_matmul_supported(w));
    for (int n : {2, 8}) {
      std::vector<float> x(static_cast<size_t>(n) * 256), a(static_cast<size_t>(n) * 9), b(a.size());
      for (auto& v : x) v = u(rng);
      matmul(w, x.data(), n, a.data(), pool, ActQuant::None);
      for (ActQuant aq : {ActQuant::Int8, ActQuant::Fast}) {
        matmul(w, x.data(), n, b.data(), pool, aq);
        EXPECT_EQ(a, b) << "n=" << n;
      }
    }
  }
}

}  // namespace
}  // namespace ss
