// The KV cache's F16 row conversion against its scalar twin (and format's
// quantize_row, whose bits the cache has always held), at odd sizes, on
// every dispatch level this CPU allows.
#include "ops/convert.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "cpu_levels.h"

namespace ss {
namespace {

float from_bits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

// Values from every range the conversion treats apart: half normals and
// subnormals, ties in both, the overflow boundary (65504 / 65520), zeros of
// both signs, float subnormals, infinities, NaNs, and random bit patterns.
std::vector<float> hard_values(std::mt19937& rng, size_t n) {
  std::vector<float> v = {0.0f,
                          -0.0f,
                          65504.0f,
                          65519.99f,
                          65520.0f,
                          -65520.0f,
                          65536.0f,
                          1e-8f,
                          -3e-8f,
                          5.96e-8f,
                          2.98e-8f,
                          6.1e-5f,
                          6.104e-5f,
                          1.0f + 0x1p-11f,
                          1.0f + 3 * 0x1p-11f,
                          from_bits(1),
                          std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::quiet_NaN()};
  std::uniform_int_distribution<uint32_t> bits;
  std::uniform_real_distribution<float> u(-70000.0f, 70000.0f), small(-1e-4f, 1e-4f);
  while (v.size() < n) {
    switch (v.size() % 3) {
      case 0:
        v.push_back(from_bits(bits(rng)));
        break;
      case 1:
        v.push_back(u(rng));
        break;
      default:
        v.push_back(small(rng));
    }
  }
  return v;
}

TEST(Convert, F16RowEqualsTheScalarTwinAndQuantizeRowAtOddSizes) {
  std::mt19937 rng(11);
  test::at_every_clone_level([&] {
    for (int n : {0, 1, 7, 8, 9, 31, 64, 172, 1001}) {
      const std::vector<float> x = hard_values(rng, static_cast<size_t>(std::max(n, 1)));
      std::vector<uint16_t> fast(static_cast<size_t>(n) + 1, 0xabcd), twin(fast.size()), ref(fast.size());
      f32_to_f16_row(x.data(), fast.data(), n);
      f32_to_f16_row_scalar(x.data(), twin.data(), n);
      quantize_row(GgmlType::F16, x.data(), ref.data(), n);
      for (int i = 0; i < n; ++i) {
        if (std::isnan(x[static_cast<size_t>(i)])) {  // a NaN stays a NaN; its payload may not
          EXPECT_EQ(fast[static_cast<size_t>(i)] & 0x7c00u, 0x7c00u) << i;
          EXPECT_NE(fast[static_cast<size_t>(i)] & 0x3ffu, 0u) << i;
          continue;
        }
        ASSERT_EQ(fast[static_cast<size_t>(i)], twin[static_cast<size_t>(i)])
            << "n " << n << " element " << i << " value " << x[static_cast<size_t>(i)];
        ASSERT_EQ(twin[static_cast<size_t>(i)], ref[static_cast<size_t>(i)]) << i;
      }
      EXPECT_EQ(fast[static_cast<size_t>(n)], 0xabcd) << "wrote past the row";
    }
  });
}

TEST(Convert, ConvertRowWritesWhatQuantizeRowWritesForEveryKvType) {
  std::mt19937 rng(12);
  std::normal_distribution<float> g(0.0f, 3.0f);
  std::vector<float> x(96);
  for (auto& v : x) v = g(rng);
  for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q8_0, GgmlType::Q4_0}) {
    std::vector<uint8_t> a(row_bytes(t, 96)), b(a.size());
    convert_row(t, x.data(), a.data(), 96);
    quantize_row(t, x.data(), b.data(), 96);
    EXPECT_EQ(a, b) << type_name(static_cast<uint32_t>(t));
  }
}

}  // namespace
}  // namespace ss
