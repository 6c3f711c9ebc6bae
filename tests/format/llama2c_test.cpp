#include "format/llama2c.h"

#include <gtest/gtest.h>

#include "test_paths.h"

namespace ss {
namespace {

TEST(Llama2c, LoadsStories260K) {
  auto ck = load_llama2c_checkpoint(test::shared("models/stories260K/stories260K.bin"));
  ASSERT_TRUE(ck.ok()) << ck.error().message;
  EXPECT_EQ(ck->header.dim, 64);
  EXPECT_EQ(ck->header.n_kv_heads, 4);
  EXPECT_TRUE(ck->header.shared_classifier);
  EXPECT_EQ(ck->layers.size(), 5u);
}

TEST(Llama2c, RejectsTruncatedAndCorruptCheckpoints) {
  auto f = MappedFile::open(test::shared("models/stories260K/stories260K.bin"));
  ASSERT_TRUE(f.ok());
  const auto full = f.value()->bytes();
  for (size_t n : {size_t{0}, size_t{10}, size_t{28}, full.size() / 2, full.size() - 4}) {
    const std::string path = test::temp_path("trunc.bin");
    FILE* o = std::fopen(path.c_str(), "wb");
    if (n > 0) std::fwrite(full.data(), 1, n, o);
    std::fclose(o);
    auto r = load_llama2c_checkpoint(path);
    std::remove(path.c_str());
    ASSERT_FALSE(r.ok()) << n;
    EXPECT_NE(r.error().message.find("trunc.bin"), std::string::npos);
  }
  // A header with nonsense sizes.
  std::vector<int32_t> hdr = {64, 172, 5, 7, 4, 512, 512};  // 7 heads do not divide 64
  const std::string path = test::temp_path("hdr.bin");
  FILE* o = std::fopen(path.c_str(), "wb");
  std::fwrite(hdr.data(), 4, hdr.size(), o);
  std::fclose(o);
  auto r = load_llama2c_checkpoint(path);
  std::remove(path.c_str());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("n_heads"), std::string::npos);
}

TEST(Llama2c, TokenizerRejectsTruncation) {
  auto f = MappedFile::open(test::shared("models/stories260K/tok512.bin"));
  ASSERT_TRUE(f.ok());
  auto ok = parse_llama2c_tokenizer(f.value()->bytes(), "tok512.bin", 512);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->pieces[259], " t");
  auto bad = parse_llama2c_tokenizer(f.value()->bytes().subspan(0, 3000), "tok512.bin", 512);
  EXPECT_FALSE(bad.ok());
}

}  // namespace
}  // namespace ss
