#pragma once
#include <cstddef>

namespace ss {
// Resident set size of this process in bytes (Linux /proc), 0 if unknown.
size_t current_rss_bytes();
size_t peak_rss_bytes();
}  // namespace ss
