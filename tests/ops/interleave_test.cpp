// The interleaved Q4_0 and Q4_K layouts hold exactly the plain matrix: every
// Q4_0 block of every row comes back byte for byte, every Q4_K weight
// decodes to the value dequantize_row gives.
#include "ops/interleave.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "format/ggml_types.h"
#include "random_weights.h"
#include "util/fp16.h"

namespace ss {
namespace {

// Row r, blocks [b0, b0 + n) of an interleaved copy back in plain Q4_0 form,
// read as the layout in ops/interleave.h describes it.
std::vector<uint8_t> plain_blocks(const uint8_t* copy, int64_t cols, int64_t r, int64_t b0, int64_t n) {
  const int64_t nb = cols / 32, m = r % 16;
  std::vector<uint8_t> out(static_cast<size_t>(n * 18));
  for (int64_t b = 0; b < n; ++b) {
    const uint8_t* src = copy + ((r / 16) * nb + b0 + b) * 288;
    std::memcpy(&out[b * 18], src + 2 * m, 2);
    for (int j = 0; j < 4; ++j) std::memcpy(&out[b * 18 + 2 + 4 * j], src + 32 + 64 * j + 4 * m, 4);
  }
  return out;
}

// Weight e (0..255) of super-block sb of row r, read from an interleaved
// Q4_K copy as the layout in ops/interleave.h describes it.
float q4k_weight(const uint8_t* copy, int64_t cols, int64_t r, int64_t sb, int e) {
  const int64_t ns = cols / 256, m = r % 16;
  const uint8_t* src = copy + ((r / 16) * ns + sb) * kQ4KInterleavedBytes;
  uint16_t d, dmin;
  std::memcpy(&d, src + 2 * m, 2);
  std::memcpy(&dmin, src + 32 + 2 * m, 2);
  const int j = e / 32, i = e % 32, p = j / 2, c = i / 4;
  const uint8_t byte = src[320 + 64 * (8 * p + c) + 4 * m + i % 4];
  const int q = j % 2 == 0 ? (byte & 15) : (byte >> 4);
  return fp16_to_fp32(d) * src[64 + 16 * j + m] * q - fp16_to_fp32(dmin) * src[192 + 16 * j + m];
}

TEST(Interleave, Q4_0AndQ4_KInWholeGroupsOf16Rows) {
  std::mt19937 rng(1);
  std::vector<uint8_t> s;
  EXPECT_TRUE(can_interleave(test::random_weights(GgmlType::Q4_0, 32, 64, rng, s)));
  EXPECT_FALSE(can_interleave(test::random_weights(GgmlType::Q4_0, 33, 64, rng, s)));
  EXPECT_FALSE(can_interleave(test::random_weights(GgmlType::Q8_0, 32, 64, rng, s)));
  EXPECT_TRUE(can_interleave(test::random_weights(GgmlType::Q4_K, 32, 512, rng, s)));
  EXPECT_FALSE(can_interleave(test::random_weights(GgmlType::Q4_K, 40, 512, rng, s)));
  EXPECT_FALSE(can_interleave(test::random_weights(GgmlType::Q6_K, 32, 512, rng, s)));
}

TEST(Interleave, EveryQ4_KWeightComesBack) {
  std::mt19937 rng(3);
  for (int rows : {16, 48}) {
    for (int cols : {256, 768}) {
      std::vector<uint8_t> storage;
      TensorView w = test::random_weights(GgmlType::Q4_K, rows, cols, rng, storage);
      ASSERT_EQ(interleaved_bytes(w), storage.size() / 144 * 148);
      std::vector<uint8_t> copy(interleaved_bytes(w));
      interleave(w, copy.data());
      TensorView iw = w;
      iw.interleaved = copy.data();
      std::vector<float> row(static_cast<size_t>(cols));
      for (int r = 0; r < rows; ++r) {
        dequantize_row(GgmlType::Q4_K, w.row(r), row.data(), cols);
        for (int e = 0; e < cols; ++e)
          ASSERT_EQ(q4k_weight(copy.data(), cols, r, e / 256, e % 256), row[e])
              << "rows=" << rows << " cols=" << cols << " r=" << r << " e=" << e;
      }
      for (int r = 0; r < rows; r += 16)
        EXPECT_EQ(rows_begin(iw, r), copy.data() + static_cast<size_t>(r / 16) * (cols / 256) * kQ4KInterleavedBytes);
    }
  }
}

TEST(Interleave, EveryBlockOfEveryRowComesBack) {
  std::mt19937 rng(2);
  for (int rows : {16, 48}) {
    for (int cols : {32, 96, 800}) {
      std::vector<uint8_t> storage;
      TensorView w = test::random_weights(GgmlType::Q4_0, rows, cols, rng, storage);
      ASSERT_EQ(interleaved_bytes(w), storage.size());
      std::vector<uint8_t> copy(interleaved_bytes(w));
      interleave(w, copy.data());
      TensorView iw = w;
      iw.interleaved = copy.data();
      const int nb = cols / 32;
      for (int r = 0; r < rows; ++r)
        for (int b0 : {0, nb / 2})
          for (int n : {1, nb - b0}) {
            const auto got = plain_blocks(copy.data(), cols, r, b0, n);
            ASSERT_EQ(std::memcmp(got.data(), w.row(r) + b0 * 18, got.size()), 0)
                << "rows=" << rows << " cols=" << cols << " r=" << r << " b0=" << b0 << " n=" << n;
          }
      for (int r = 0; r < rows; r += 16)
        EXPECT_EQ(rows_begin(iw, r), copy.data() + static_cast<size_t>(r / 16) * nb * 288);
    }
  }
}

}  // namespace
}  // namespace ss
