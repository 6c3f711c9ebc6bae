// What a request streams: stop strings cut the text, their possible
// beginnings are held back, no piece ends inside a UTF-8 character, and what
// goes out is valid JSON whatever bytes the model produced.
#include "server/stream_text.h"

#include <gtest/gtest.h>

#include <random>

#include "server/json_text.h"

namespace ss {
namespace {

TEST(StreamText, WithoutStopStringsEverythingGoesOutAtOnce) {
  StreamText st;
  EXPECT_FALSE(st.push("Once upon"));
  EXPECT_EQ(st.take(), "Once upon");
  EXPECT_FALSE(st.push(" a time"));
  EXPECT_EQ(st.take(), " a time");
  EXPECT_EQ(st.finish(), "");
}

TEST(StreamText, StopStringAcrossPiecesCutsTheTextAndIsNeverSent) {
  StreamText st({"THE END"});
  std::string out;
  for (const char* p : {"and they lived. TH", "E E", "ND and more"}) {
    const bool stopped = st.push(p);
    out += st.take();
    if (stopped) break;
  }
  EXPECT_TRUE(st.stopped());
  out += st.finish();
  EXPECT_EQ(out, "and they lived. ");
}

TEST(StreamText, HoldBackEndsOnAWholeCharacter) {
  // Stop "ab" holds one byte back; the cut would fall inside the euro sign.
  StreamText st({"ab"});
  st.push("x\xE2\x82\xAC");
  EXPECT_EQ(st.take(), "x");  // not "x\xE2\x82"
  st.push("y");
  EXPECT_EQ(st.take(), "\xE2\x82\xAC");
  EXPECT_EQ(st.finish(), "y");
}

TEST(StreamText, IncompleteCharacterWaitsInvalidBytesDoNot) {
  StreamText st;
  st.push("a\xF0\x9F");  // first half of an emoji
  EXPECT_EQ(st.take(), "a");
  st.push("\x98\x80");
  EXPECT_EQ(st.take(), "\xF0\x9F\x98\x80");
  st.push(
      "\xE2\x82"
      "A\xFF");  // can never complete: out as it is
  EXPECT_EQ(st.take(),
            "\xE2\x82"
            "A\xFF");
  st.push("\xC3");
  EXPECT_EQ(st.take(), "");
  EXPECT_EQ(st.finish(), "\xC3");  // the end flushes what is left
}

TEST(StreamText, InvalidBytesBecomeReplacementCharactersInJson) {
  const std::string enc = encode_json(nlohmann::json{{"content", "ok \xFF\xC3 end"}});
  const auto back = nlohmann::json::parse(enc);
  EXPECT_EQ(back["content"], "ok \xEF\xBF\xBD\xEF\xBF\xBD end");
}

// Random bytes (ASCII, whole characters, stray bytes) in random pieces with
// random stop strings, against a plain reference: the concatenation is the
// text up to the first stop string.
TEST(StreamText, RandomPiecesMatchTheReferenceCut) {
  std::mt19937 rng(17);
  const std::vector<std::string> atoms = {
      "a", "b", "E", "N", "D", " ", "\xC3\xA9", "\xE2\x82\xAC", "\xF0\x9F\x98\x80", "\x80", "\xFF", "\xE2\x82"};
  for (int round = 0; round < 3000; ++round) {
    std::vector<std::string> stops;
    for (int n = static_cast<int>(rng() % 3); n > 0; --n) {
      std::string s;
      for (int k = 1 + static_cast<int>(rng() % 3); k > 0; --k) s += atoms[rng() % atoms.size()];
      stops.push_back(s);
    }
    std::string all;
    for (int k = static_cast<int>(rng() % 40); k > 0; --k) all += atoms[rng() % atoms.size()];
    StreamText st(stops);
    std::string out;
    for (size_t at = 0; at < all.size();) {
      const size_t len = std::min<size_t>(all.size() - at, rng() % 7);
      const bool stopped = st.push(std::string_view(all).substr(at, len));
      at += len;
      const std::string piece = st.take();
      ASSERT_TRUE(nlohmann::json::accept(encode_json(nlohmann::json(piece))));
      out += piece;
      if (stopped) break;
    }
    out += st.finish();
    size_t cut = all.size();
    for (const auto& s : stops)
      if (!s.empty() && all.find(s) != std::string::npos) cut = std::min(cut, all.find(s));
    ASSERT_EQ(out, all.substr(0, cut)) << "round " << round;
  }
}

}  // namespace
}  // namespace ss
