// The CPU cap: parsing, monotone levels, the features each level allows, and
// the scoped override tests use to walk the dispatch levels.
#include "util/cpu_features.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace ss
