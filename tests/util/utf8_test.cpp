#include "util/utf8.h"

#include <gtest/gtest.h>

namespace ss {
namespace {

TEST(Utf8StreamBuffer, HoldsBackIncompleteCharacters) {
  Utf8StreamBuffer b;
  const std::string euro = "\xE2\x82\xAC";  // 3 bytes
  EXPECT_EQ(b.push("a"), "a");
  EXPECT_EQ(b.push(euro.substr(0, 1)), "");
  EXPECT_EQ(b.push(euro.substr(1, 1)), "");
  EXPECT_EQ(b.push(euro.substr(2, 1) + "b"), euro + "b");
  EXPECT_EQ(b.flush(), "");
}

TEST(Utf8StreamBuffer, ReleasesInvalidSequences) {
  Utf8StreamBuffer b;
  EXPECT_EQ(b.push("\xE2x"), "\xE2x");  // lead byte followed by ASCII: cannot become valid
  EXPECT_EQ(b.push("\xF0\x9F"), "");
  EXPECT_EQ(b.flush(), "\xF0\x9F");
}

TEST(Utf8, SplitsIntoCharacters) {
  const auto c = utf8_chars("a\xC3\xA4\xF0\x9F\xA6\x99\xFF");
  ASSERT_EQ(c.size(), 4u);
  EXPECT_EQ(c[1], "\xC3\xA4");
  EXPECT_EQ(c[2], "\xF0\x9F\xA6\x99");
  EXPECT_EQ(c[3], "\xFF");
}

TEST(Utf8, RoundTripsCodePoints) {
  for (uint32_t cp : {0x41u, 0xE4u, 0x20ACu, 0x1F999u}) {
    std::string s;
    utf8_append(s, cp);
    size_t i = 0;
    EXPECT_EQ(utf8_next(s, i), cp);
    EXPECT_EQ(i, s.size());
  }
}

}  // namespace
}  // namespace ss
