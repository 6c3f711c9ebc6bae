#include "util/fp16.h"

#include <gtest/gtest.h>

#include <cmath>

namespace ss {
namespace {

TEST(Fp16, RoundTripsAllHalfValues) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = fp16_to_fp32(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    EXPECT_EQ(fp32_to_fp16(f), h) << std::hex << h;
  }
}

TEST(Fp16, KnownValues) {
  EXPECT_EQ(fp16_to_fp32(0x3C00), 1.0f);
  EXPECT_EQ(fp16_to_fp32(0xC000), -2.0f);
  EXPECT_EQ(fp16_to_fp32(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(fp32_to_fp16(65520.0f), 0x7C00);  // rounds to infinity
  EXPECT_EQ(bf16_to_fp32(fp32_to_bf16(1.5f)), 1.5f);
  EXPECT_EQ(fp32_to_bf16(1.0f + std::ldexp(1.0f, -9)), fp32_to_bf16(1.0f));  // ties to even
}

}  // namespace
}  // namespace ss
