#include "util/utf8.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

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

// The lead table against the encoder: a (lead, next byte) pair is allowed
// exactly when some scalar value's encoding starts with it.
TEST(Utf8, LeadTableMatchesEveryEncodedCodePoint) {
  std::set<std::pair<int, int>> starts;  // (lead, second byte or -1)
  std::map<int, int> follow;             // lead -> bytes after it
  for (uint32_t cp = 0; cp <= 0x10FFFF; ++cp) {
    if (cp >= 0xD800 && cp <= 0xDFFF) continue;
    std::string s;
    utf8_append(s, cp);
    const int lead = static_cast<unsigned char>(s[0]);
    starts.insert({lead, s.size() > 1 ? static_cast<unsigned char>(s[1]) : -1});
    follow[lead] = static_cast<int>(s.size()) - 1;
    const Utf8Lead l = utf8_lead(static_cast<unsigned char>(lead));
    uint32_t decoded = l.bits;
    for (size_t k = 1; k < s.size(); ++k) decoded = (decoded << 6) | (static_cast<unsigned char>(s[k]) & 0x3Fu);
    ASSERT_EQ(decoded, cp);
  }
  for (int lead = 0; lead < 256; ++lead) {
    const Utf8Lead l = utf8_lead(static_cast<unsigned char>(lead));
    const auto f = follow.find(lead);
    if (f == follow.end()) {
      EXPECT_EQ(l.follow, -1) << lead;
      continue;
    }
    EXPECT_EQ(l.follow, f->second) << lead;
    if (l.follow == 0) continue;
    for (int b = 0; b < 256; ++b) EXPECT_EQ(b >= l.lo && b <= l.hi, starts.count({lead, b}) == 1) << lead << " " << b;
  }
}

}  // namespace
}  // namespace ss
