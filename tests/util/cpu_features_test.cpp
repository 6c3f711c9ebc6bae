// The CPU cap: parsing, monotone levels, the features each level allows, and
// the scoped override tests use to walk the dispatch levels.
#include "util/cpu_features.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

namespace ss {
namespace {

TEST(CpuFeatures, LevelsParseByNameAndRejectOthers) {
  for (CpuLevel l : {CpuLevel::Sse4, CpuLevel::Avx2, CpuLevel::AvxVnni, CpuLevel::Avx512, CpuLevel::Native}) {
    auto p = parse_cpu_level(cpu_level_name(l));
    ASSERT_TRUE(p.ok()) << cpu_level_name(l);
    EXPECT_EQ(*p, l);
  }
  for (const char* bad : {"", "AVX2", "avx", "avx512f", "native "}) {
    auto p = parse_cpu_level(bad);
    ASSERT_FALSE(p.ok()) << bad;
    EXPECT_NE(p.error().message.find("expected native, avx512, avxvnni, avx2 or sse4"), std::string::npos);
  }
}

TEST(CpuFeatures, EachCapAllowsASubsetOfTheNextAndOfWhatIsDetected) {
  const uint32_t detected = cpu_detected();
  std::printf("cpu: %s; detected: %s; cap: %s\n", cpu_model_name().c_str(), cpu_feature_names(detected).c_str(),
              cpu_level_name(cpu_cap()));
  uint32_t prev = 0;
  for (CpuLevel l : {CpuLevel::Sse4, CpuLevel::Avx2, CpuLevel::AvxVnni, CpuLevel::Avx512, CpuLevel::Native}) {
    ScopedCpuCap cap(l);
    const uint32_t u = cpu_usable();
    EXPECT_EQ(u & ~detected, 0u) << cpu_level_name(l);
    EXPECT_EQ(prev & ~u, 0u) << cpu_level_name(l) << " drops what a lower level allows";
    if (l == CpuLevel::Native) {
      EXPECT_EQ(u, detected);
    }
    if (l <= CpuLevel::Avx2) {
      EXPECT_EQ(u & kCpuAvxVnni, 0u);
    }
    if (l <= CpuLevel::AvxVnni) {
      EXPECT_EQ(u & (kCpuAvx512 | kCpuAvx512Vnni | kCpuAvx512Bf16 | kCpuAmxInt8 | kCpuAmxBf16), 0u);
    }
    if (l <= CpuLevel::Avx512) {
      EXPECT_EQ(u & (kCpuAmxInt8 | kCpuAmxBf16), 0u);
    }
    if (l == CpuLevel::Sse4) {
      EXPECT_EQ(u & kCpuAvx2, 0u);
    }
    prev = u;
  }
}

TEST(CpuFeatures, DependentFeaturesComeWithTheirBase) {
  const uint32_t f = cpu_detected();
  if (f & (kCpuAvx512 | kCpuAvxVnni)) {
    EXPECT_TRUE(f & kCpuAvx2);
  }
  if (f & (kCpuAvx512Vnni | kCpuAvx512Bf16 | kCpuAmxInt8 | kCpuAmxBf16)) {
    EXPECT_TRUE(f & kCpuAvx512);
  }
}

TEST(CpuFeatures, ScopedCapRestoresAndBumpsTheGeneration) {
  const CpuLevel before = cpu_cap();
  const uint32_t usable = cpu_usable(), gen = cpu_cap_generation();
  {
    ScopedCpuCap cap(CpuLevel::Sse4);
    EXPECT_EQ(cpu_cap(), CpuLevel::Sse4);
    EXPECT_NE(cpu_cap_generation(), gen);
  }
  EXPECT_EQ(cpu_cap(), before);
  EXPECT_EQ(cpu_usable(), usable);
}

TEST(CpuFeatures, LevelsToTestStartAtTheCapAndEachChangesWhatIsUsable) {
  const auto levels = cpu_levels_to_test();
  ASSERT_FALSE(levels.empty());
  EXPECT_EQ(levels.front(), cpu_cap());
  uint32_t prev = ~0u;
  for (CpuLevel l : levels) {
    EXPECT_LE(l, cpu_cap());
    ScopedCpuCap cap(l);
    EXPECT_NE(cpu_usable(), prev) << cpu_level_name(l) << " repeats the level above";
    EXPECT_EQ(cpu_usable() & ~prev, 0u);
    prev = cpu_usable();
  }
}

TEST(CpuFeatures, LevelsToTestUnderAMaskKeepTheStrongestOfEachMaskedSet) {
  const uint32_t mask = kCpuSse4 | kCpuAvx2 | kCpuAvx512;
  const auto all = cpu_levels_to_test();
  const auto masked = cpu_levels_to_test(mask);
  ASSERT_FALSE(masked.empty());
  EXPECT_EQ(masked.front(), cpu_cap());
  // A subsequence of the unmasked walk, and every masked set of usable
  // features it reaches is reached exactly once.
  size_t j = 0;
  std::vector<uint32_t> seen;
  for (CpuLevel l : masked) {
    while (j < all.size() && all[j] != l) ++j;
    ASSERT_LT(j, all.size()) << cpu_level_name(l) << " is not in the unmasked walk";
    ScopedCpuCap cap(l);
    const uint32_t u = cpu_usable() & mask;
    for (uint32_t s : seen) EXPECT_NE(s, u) << cpu_level_name(l) << " repeats a masked set";
    seen.push_back(u);
  }
  for (CpuLevel l : all) {
    ScopedCpuCap cap(l);
    const uint32_t u = cpu_usable() & mask;
    EXPECT_NE(std::find(seen.begin(), seen.end(), u), seen.end()) << cpu_level_name(l) << " is not covered";
  }
  // The full mask is the unmasked walk.
  EXPECT_EQ(cpu_levels_to_test(~0u), all);
}

}  // namespace
}  // namespace ss
