// GGUF reader/writer: round trip, and clean errors on corrupt input.
#include "format/gguf.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "format/gguf_writer.h"
#include "test_paths.h"

namespace ss {
namespace {

std::vector<uint8_t> small_file() {
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.set_u32("llama.block_count", 3);
  w.set_f32("llama.rope.freq_base", 500.0f);
  w.set_strings("tokenizer.ggml.tokens", {"a", "b", "c"});
  std::vector<float> data(64 * 3);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<float>(i) * 0.25f - 7.0f;
  w.add_tensor("t.f32", GgmlType::F32, {64, 3}, data);
  w.add_tensor("t.q8", GgmlType::Q8_0, {64, 3}, data);
  return w.bytes();
}

Result<GgufFile> parse_bytes(const std::vector<uint8_t>& b, const std::string& name) {
  const std::string path = test::temp_path(name);
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!b.empty()) std::fwrite(b.data(), 1, b.size(), f);
  std::fclose(f);
  auto r = GgufFile::open(path);
  std::remove(path.c_str());  // the mapping stays valid after unlink
  return r;
}

TEST(Gguf, WriterRoundTrip) {
  auto g = parse_bytes(small_file(), "rt.gguf");
  ASSERT_TRUE(g.ok()) << g.error().message;
  EXPECT_EQ(g->version(), 3u);
  EXPECT_EQ(g->get_string("general.architecture").value(), "llama");
  EXPECT_EQ(g->get_int("llama.block_count").value(), 3);
  EXPECT_FLOAT_EQ(static_cast<float>(g->get_float("llama.rope.freq_base").value()), 500.0f);
  EXPECT_EQ(g->find("tokenizer.ggml.tokens")->arr.size(), 3u);
  auto t = g->tensor("t.f32");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->ne0, 64);
  EXPECT_EQ(t->ne1, 3);
  EXPECT_EQ(t->f32()[5], 5 * 0.25f - 7.0f);
  EXPECT_TRUE(g->tensor("t.q8").ok());
  EXPECT_FALSE(g->tensor("missing").ok());
}

// A write cut short (here the process dies while a tensor's rows are being
// produced, as under a kill or a full disk) leaves the file that was there,
// whole: GgufWriter writes beside it and renames. Through a link, the file it
// names; devices in place.
TEST(Gguf, WriteCutShortLeavesTheOldFile) {
  const test::TempPath path("cut.gguf");
  GgufWriter good;
  good.set_string("general.architecture", "llama");
  good.add_tensor("t", GgmlType::F32, {64, 3}, std::vector<float>(64 * 3, 1.0f));
  ASSERT_TRUE(good.write(path.path).ok());
  const std::string before = test::read_file(path.path);
  ASSERT_FALSE(before.empty());
  GgufWriter cut;
  cut.set_string("general.architecture", "llama");
  cut.add_tensor_rows("t", GgmlType::F32, {64, 100}, [](int64_t row, uint8_t* dst) {
    if (row == 50) std::_Exit(3);
    std::memset(dst, 0, 64 * sizeof(float));
  });
  const pid_t child = fork();
  if (child == 0) {
    (void)cut.write(path.path);
    std::_Exit(0);
  }
  ASSERT_GT(child, 0);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 3);  // died mid-tensor
  EXPECT_EQ(test::read_file(path.path), before);
  // The cut-short copy, beside it (a kill leaves no one to remove it).
  const auto parts = test::partial_files_of(path.path);
  ASSERT_EQ(parts.size(), 1u);
  EXPECT_EQ(parts[0].rfind(path.path + ".part." + std::to_string(child) + ".", 0), 0u) << parts[0];  // the child's
  std::filesystem::remove(parts[0]);
  // A whole write replaces the file and leaves nothing beside it.
  GgufWriter next;
  next.set_string("general.architecture", "llama");
  next.add_tensor("t", GgmlType::F32, {64, 4}, std::vector<float>(64 * 4, 2.0f));
  ASSERT_TRUE(next.write(path.path).ok());
  EXPECT_TRUE(test::partial_files_of(path.path).empty());
  auto g = GgufFile::open(path.path);
  ASSERT_TRUE(g.ok()) << g.error().message;
  EXPECT_EQ(g->tensor("t")->ne1, 4);
  // Through a symbolic link: the file it names is replaced, the link stays.
  const test::TempPath link("cut_link.gguf");
  std::filesystem::create_symlink(path.path, link.path);
  ASSERT_TRUE(good.write(link.path).ok());
  EXPECT_TRUE(std::filesystem::is_symlink(link.path));
  EXPECT_EQ(test::read_file(path.path), before);
  EXPECT_TRUE(test::partial_files_of(link.path).empty());
  EXPECT_TRUE(test::partial_files_of(path.path).empty());
  // -o /dev/null: written in place, the device left a device.
  ASSERT_TRUE(next.write("/dev/null").ok());
  struct stat st {};
  ASSERT_EQ(stat("/dev/null", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
}

TEST(Gguf, ParsesBundledStories260K) {
  auto g = GgufFile::open(test::shared("models/stories260K/stories260K.gguf"));
  ASSERT_TRUE(g.ok()) << g.error().message;
  EXPECT_EQ(g->tensors().size(), 48u);
  EXPECT_EQ(g->get_int("llama.embedding_length").value(), 64);
}

TEST(Gguf, RejectsBadMagicAndVersion) {
  auto b = small_file();
  b[0] = 'X';
  auto r = parse_bytes(b, "magic.gguf");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("not a GGUF"), std::string::npos);
  b = small_file();
  b[4] = 9;
  r = parse_bytes(b, "ver.gguf");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("version"), std::string::npos);
}

TEST(Gguf, RejectsEveryTruncation) {
  const auto b = small_file();
  for (size_t n = 0; n < b.size(); n += (n < 400 ? 1 : 97)) {
    std::vector<uint8_t> cut(b.begin(), b.begin() + static_cast<std::ptrdiff_t>(n));
    auto r = parse_bytes(cut, "trunc.gguf");
    EXPECT_FALSE(r.ok()) << "accepted a file truncated to " << n << " bytes";
    if (!r.ok()) {
      EXPECT_NE(r.error().message.find("trunc.gguf"), std::string::npos);
    }
  }
}

TEST(Gguf, RejectsOversizedCounts) {
  auto b = small_file();
  uint64_t huge = uint64_t{1} << 60;
  std::memcpy(b.data() + 8, &huge, 8);  // tensor count
  auto r = parse_bytes(b, "count.gguf");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("implausible"), std::string::npos);
  b = small_file();
  std::memcpy(b.data() + 16, &huge, 8);  // metadata count
  EXPECT_FALSE(parse_bytes(b, "kv.gguf").ok());
  // A string length past the end of the file (first key's length field).
  b = small_file();
  std::memcpy(b.data() + 24, &huge, 8);
  r = parse_bytes(b, "str.gguf");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("exceeds"), std::string::npos);
}

TEST(Gguf, RandomByteFlipsNeverCrash) {
  const auto base = small_file();
  uint32_t seed = 12345;
  for (int i = 0; i < 2000; ++i) {
    auto b = base;
    for (int k = 0; k < 4; ++k) {
      seed = seed * 1664525u + 1013904223u;
      b[seed % b.size()] = static_cast<uint8_t>(seed >> 24);
    }
    auto r = parse_bytes(b, "flip.gguf");
    if (r.ok())
      for (const auto& t : r->tensors()) (void)r->tensor(t.name);
  }
}

}  // namespace
}  // namespace ss
