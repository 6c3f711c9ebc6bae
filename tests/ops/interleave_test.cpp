// The interleaved layouts hold exactly the plain matrix: every Q4_0 block of
// every row comes back byte for byte, every Q8_0/Q4_K/Q5_K/Q6_K weight
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
// Q4_K (Q5_K: five) copy as the layout in ops/interleave.h describes it.
float k45_weight(const uint8_t* copy, int64_t cols, int64_t r, int64_t sb, int e, bool five) {
  const int64_t ns = cols / 256, m = r % 16;
  const uint8_t* src = copy + ((r / 16) * ns + sb) * (five ? kQ5KInterleavedBytes : kQ4KInterleavedBytes);
  uint16_t d, dmin;
  std::memcpy(&d, src + 2 * m, 2);
  std::memcpy(&dmin, src + 32 + 2 * m, 2);
  const int j = e / 32, i = e % 32, p = j / 2, c = i / 4;
  const uint8_t* pair = src + 320 + (five ? 640 : 512) * p;
  const uint8_t byte = pair[64 * c + 4 * m + i % 4];
  int q = j % 2 == 0 ? (byte & 15) : (byte >> 4);
  if (five) q |= ((pair[512 + 64 * (c / 4) + 4 * m + i % 4] >> (2 * (c % 4) + j % 2)) & 1) << 4;
  return fp16_to_fp32(d) * src[64 + 16 * j + m] * q - fp16_to_fp32(dmin) * src[192 + 16 * j + m];
}
float q4k_weight(const uint8_t* copy, int64_t cols, int64_t r, int64_t sb, int e) {
  return k45_weight(copy, cols, r, sb, e, false);
}
float q5k_weight(const uint8_t* copy, int64_t cols, int64_t r, int64_t sb, int e) {
  return k45_weight(copy, cols, r, sb, e, true);
}

// Weight e of block b (32 weights) of row r of an interleaved Q8_0 copy.
float q8_weight(const uint8_t* copy, int64_t cols, int64_t r, int64_t b, int e) {
  const uint8_t* src = copy + ((r / 16) * (cols / 32) + b) * kQ8InterleavedBlockBytes;
  const int64_t m = r % 16;
  uint16_t d;
  std::memcpy(&d, src + 2 * m, 2);
  return fp16_to_fp32(d) * static_cast<float>(static_cast<int8_t>(src[32 + 64 * (e / 4) + 4 * m + e % 4] ^ 0x80));
}

// The same for Q6_K.
float q6k_weight(const uint8_t* copy, int64_t cols, int64_t r, int64_t sb, int e) {
  const int64_t ns = cols / 256, m = r % 16;
  const uint8_t* src = copy + ((r / 16) * ns + sb) * kQ6KInterleavedBytes;
  uint16_t d;
  std::memcpy(&d, src + 2 * m, 2);
  const int p = e / 64, within = e % 64, c = (within % 32) / 4, i = within % 4;
  const bool high = within >= 32;
  const uint8_t* pair = src + 288 + 768 * p;
  // Per h < 4: 64 bytes of high nibbles (chunks 2h, 2h + 1), then chunks 2h
  // and 2h + 1 of 64 bytes each.
  const int h = c / 2, chunk = 192 * h + 64 + 64 * (c % 2);
  const uint8_t byte = pair[chunk + 4 * m + i], nibble = (pair[192 * h + 4 * m + i] >> (4 * (c % 2))) & 15;
  const int v = high ? nibble | (byte >> 6) << 4 : byte & 63;
  const auto scale = static_cast<int8_t>(src[32 + 16 * (e / 16) + m]);
  return fp16_to_fp32(d) * static_cast<float>(scale) * static_cast<float>(v - 32);
}

TEST(Interleave, QuantizedTypesInWholeGroupsOf16Rows) {
  std::mt19937 rng(1);
  std::vector<uint8_t> s;
  EXPECT_TRUE(can_interleave(test::random_weights(GgmlType::Q4_0, 32, 64, rng, s)));
  EXPECT_FALSE(can_interleave(test::random_weights(GgmlType::Q4_0, 33, 64, rng, s)));
  EXPECT_TRUE(can_interleave(test::random_weights(GgmlType::Q8_0, 32, 64, rng, s)));
  EXPECT_FALSE(can_interleave(test::random_weights(GgmlType::F16, 32, 64, rng, s)));
  EXPECT_TRUE(can_interleave(test::random_weights(GgmlType::Q4_K, 32, 512, rng, s)));
  EXPECT_FALSE(can_interleave(test::random_weights(GgmlType::Q4_K, 40, 512, rng, s)));
  EXPECT_TRUE(can_interleave(test::random_weights(GgmlType::Q6_K, 32, 512, rng, s)));
  EXPECT_TRUE(can_interleave(test::random_weights(GgmlType::Q5_K, 32, 512, rng, s)));
}

// Every weight of every row decodes from the interleaved copy of `type` to
// what dequantize_row gives; blocks of `block` weights, `file_bytes` in the
// file and `group_block_bytes` for 16 rows in the copy.
void every_weight_comes_back(GgmlType type, float (*weight)(const uint8_t*, int64_t, int64_t, int64_t, int), int block,
                             size_t file_bytes, int64_t group_block_bytes) {
  std::mt19937 rng(3);
  for (int rows : {16, 48}) {
    for (int cols : {block, 3 * block, 2048}) {
      std::vector<uint8_t> storage;
      TensorView w = test::random_weights(type, rows, cols, rng, storage);
      ASSERT_EQ(interleaved_bytes(w), storage.size() / file_bytes * group_block_bytes / 16);
      std::vector<uint8_t> copy(interleaved_bytes(w));
      interleave(w, copy.data());
      TensorView iw = w;
      iw.interleaved = copy.data();
      std::vector<float> row(static_cast<size_t>(cols));
      for (int r = 0; r < rows; ++r) {
        dequantize_row(type, w.row(r), row.data(), cols);
        for (int e = 0; e < cols; ++e)
          ASSERT_EQ(weight(copy.data(), cols, r, e / block, e % block), row[e])
              << "rows=" << rows << " cols=" << cols << " r=" << r << " e=" << e;
      }
      for (int r = 0; r < rows; r += 16)
        EXPECT_EQ(rows_begin(iw, r), copy.data() + static_cast<size_t>(r / 16) * (cols / block) * group_block_bytes);
    }
  }
}

TEST(Interleave, EveryQ8_0WeightComesBack) { every_weight_comes_back(GgmlType::Q8_0, q8_weight, 32, 34, 544); }

TEST(Interleave, EveryQ4_KWeightComesBack) {
  every_weight_comes_back(GgmlType::Q4_K, q4k_weight, 256, kQ4_KBytes, kQ4KInterleavedBytes);
}

TEST(Interleave, EveryQ5_KWeightComesBack) {
  every_weight_comes_back(GgmlType::Q5_K, q5k_weight, 256, kQ5_KBytes, kQ5KInterleavedBytes);
}

TEST(Interleave, EveryQ6_KWeightComesBack) {
  every_weight_comes_back(GgmlType::Q6_K, q6k_weight, 256, kQ6_KBytes, kQ6KInterleavedBytes);
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
