// The read-bandwidth probe must read every word it times exactly once, by
// either method and at every clone level: its sums against a scalar sum over
// the same ranges (sizes rounded down to 256 bytes, pieces of unequal sizes,
// an odd count of them, ranges shorter than a piece).
#include "ops/bandwidth.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "cpu_levels.h"

namespace ss {
namespace {

TEST(ReadBandwidth, EveryMethodReadsEachWordOnce) {
  std::mt19937 rng(5);
  // In 64 KiB pieces: a single 256-byte unit, under one piece, 3.5 pieces,
  // one and a bit, one rounded down to nothing, one of 768 bytes: nine
  // pieces (64, 9984, 16384 x 3, 8192, 16384, 64, 192 words), so the
  // two-stream sweep pairs a shorter first piece with a longer one and the
  // other way round, and reads the last alone; the four-stream sweep reads
  // quarters of unequal pieces side by side and leaves one to three alone.
  const size_t sizes[] = {256, 40000, (7u << 15) + 100, (1u << 16) + 256, 255, 1000};
  std::vector<std::vector<uint32_t>> bufs;
  std::vector<ByteRange> ranges;
  uint32_t expected = 0;
  for (size_t bytes : sizes) {
    bufs.emplace_back(bytes / 4 + 1);
    for (auto& w : bufs.back()) w = rng();
    ranges.push_back({bufs.back().data(), bytes});
    for (size_t i = 0; i < bytes / 256 * 64; ++i) expected += bufs.back()[i];
  }
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    test::at_every_clone_level([&] {
      for (ReadMethod m : kReadMethods) {
        const ReadSweep s = read_sweep(pool, ranges, m);
        EXPECT_EQ(s.sum, expected) << "threads " << threads << " method " << static_cast<int>(m);
        EXPECT_GT(s.bytes_per_s, 0);
      }
    });
    EXPECT_GT(measure_read_bandwidth(pool, ranges, 1), 0);
  }
}

}  // namespace
}  // namespace ss
