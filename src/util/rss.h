#pragma once
#include <cstddef>

namespace ss {
// Resident set size of this process in bytes (Linux /proc), 0 if unknown.
size_t current_rss_bytes();
size_t peak_rss_bytes();
// Anonymous memory of this process on transparent huge pages (Linux
// /proc/self/smaps_rollup), 0 if unknown. Weights read every token run
// measurably slower when the kernel could not give their arena huge pages
// (fragmented memory), so benchmarks report it beside their timings.
size_t anon_huge_page_bytes();
}  // namespace ss
