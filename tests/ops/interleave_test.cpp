// The interleaved Q4_0 layout holds exactly the plain matrix: every block of
// every row comes back byte for byte.
#include "ops/interleave.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "random_weights.h"

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

TEST(Interleave, OnlyQ4_0InWholeGroupsOf16Rows) {
  std::mt19937 rng(1);
  std::vector<uint8_t> s;
  EXPECT_TRUE(can_interleave(test::random_weights(GgmlType::Q4_0, 32, 64, rng, s)));
  EXPECT_FALSE(can_interleave(test::random_weights(GgmlType::Q4_0, 33, 64, rng, s)));
  EXPECT_FALSE(can_interleave(test::random_weights(GgmlType::Q8_0, 32, 64, rng, s)));
}

TEST(Interleave, EveryBlockOfEveryRowComesBack) {
  std::mt19937 rng(2);
  for (int rows : {16, 48}) {
    for (int cols : {32, 96, 800}) {
      std::vector<uint8_t> storage;
      TensorView w = test::random_weights(GgmlType::Q4_0, rows, cols, rng, storage);
      ASSERT_EQ(interleaved_bytes(w), storage.size());
      std::vector<uint8_t> copy(interleaved_bytes(w));
      interleave_q4_0(w, copy.data());
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
