// allocate_huge's promises, and the huge-page count benchmarks print.
#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <string>

#include "util/mapped_file.h"
#include "util/rss.h"

namespace ss {
namespace {

// "[madvise]" or "[always]" where the kernel may back advised memory with
// huge pages; "" where the file is absent (not Linux, or masked).
std::string thp_mode() {
  std::ifstream in("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string all, word;
  while (in >> word)
    if (word.front() == '[') all = word;
  return all;
}

TEST(HugePages, ArenaIsAlignedZeroedAndCountedOnHugePagesWhereTheKernelAllows) {
  constexpr size_t kHuge = size_t{2} << 20, kBytes = 16 * kHuge + 12345;
  const size_t before = anon_huge_page_bytes();
  auto mem = allocate_huge(kBytes);
  ASSERT_NE(mem, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(mem.get()) % kHuge, 0u);
  for (size_t i = 0; i < kBytes; i += 4093) ASSERT_EQ(mem.get()[i], 0) << i;
  touch_pages(mem.get(), kBytes);
  const size_t after = anon_huge_page_bytes();
  // A whole number of huge pages, never more than is resident.
  EXPECT_EQ(after % kHuge, 0u);
  EXPECT_LE(after, current_rss_bytes());
  const std::string mode = thp_mode();
  if (mode != "[madvise]" && mode != "[always]") GTEST_SKIP() << "transparent huge pages: '" << mode << "'";
  // Seventeen advised 2 MiB pages, faulted in: even a fragmented machine
  // compacts memory for at least one of them (defrag "madvise" is the
  // default); a count that stays flat means the reader is broken.
  EXPECT_GT(after, before) << "before " << before << " after " << after;
}

}  // namespace
}  // namespace ss
