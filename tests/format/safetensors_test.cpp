#include "format/safetensors.h"

#include <gtest/gtest.h>

#include <cstring>

#include "test_paths.h"

namespace ss {
namespace {

std::vector<uint8_t> make_file(const std::string& header, size_t data_bytes) {
  std::vector<uint8_t> b(8 + header.size() + data_bytes, 0);
  const uint64_t n = header.size();
  std::memcpy(b.data(), &n, 8);
  std::memcpy(b.data() + 8, header.data(), header.size());
  return b;
}

Status parse(const std::vector<uint8_t>& b, SafetensorsSet& s) {
  const std::string path = test::temp_path("x.safetensors");
  FILE* f = std::fopen(path.c_str(), "wb");
  std::fwrite(b.data(), 1, b.size(), f);
  std::fclose(f);
  auto m = MappedFile::open(path);
  std::remove(path.c_str());
  if (!m.ok()) return m.error();
  return s.add(m.value());
}

TEST(Safetensors, ParsesValidFile) {
  SafetensorsSet s;
  auto st = parse(
      make_file(R"({"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]},"__metadata__":{"format":"pt"}})", 24), s);
  ASSERT_TRUE(st.ok()) << st.error().message;
  auto t = s.tensor("w");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->ne0, 3);
  EXPECT_EQ(t->ne1, 2);
}

TEST(Safetensors, RejectsCorruptFiles) {
  const std::vector<std::pair<std::string, std::vector<uint8_t>>> cases = {
      {"short", {1, 2, 3}},
      {"huge header", make_file(std::string(16, ' '), 0)},
      {"not json", make_file("{nope", 0)},
      {"offsets past end", make_file(R"({"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]}})", 8)},
      {"size mismatch", make_file(R"({"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,20]}})", 24)},
      {"negative shape", make_file(R"({"w":{"dtype":"F32","shape":[-2,3],"data_offsets":[0,24]}})", 24)},
      {"bad dtype", make_file(R"({"w":{"dtype":"Q9","shape":[2],"data_offsets":[0,2]}})", 2)},
      {"wrong types", make_file(R"({"w":{"dtype":1,"shape":"x","data_offsets":[0]}})", 2)},
  };
  for (auto [name, bytes] : cases) {
    if (name == "huge header") {
      const uint64_t n = uint64_t{1} << 50;
      std::memcpy(bytes.data(), &n, 8);
    }
    SafetensorsSet s;
    EXPECT_FALSE(parse(bytes, s).ok()) << name;
  }
}

TEST(Safetensors, OpensBundledModelDirectory) {
  auto s = SafetensorsSet::open_dir(test::shared("models/tinystories-656k"));
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_TRUE(s->has("lm_head.weight"));
  EXPECT_FALSE(s->has("model.embed_tokens.weight"));
}

}  // namespace
}  // namespace ss
