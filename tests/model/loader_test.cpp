// Model loading from every format, and clean errors for bad files.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "format/gguf_writer.h"
#include "model/model.h"
#include "test_paths.h"

namespace ss {
namespace {

TEST(Loader, LoadsAllBundledFormats) {
  auto g = load_model({test::shared("models/stories260K/stories260K.gguf"), ""});
  ASSERT_TRUE(g.ok()) << g.error().message;
  EXPECT_EQ(g.value()->config.n_kv_heads, 4);
  EXPECT_EQ(g.value()->config.rotaries[0].neox, false);
  EXPECT_EQ(g.value()->config.trained_context, 2048);
  auto b =
      load_model({test::shared("models/stories260K/stories260K.bin"), test::shared("models/stories260K/tok512.bin")});
  ASSERT_TRUE(b.ok()) << b.error().message;
  EXPECT_EQ(b.value()->config.trained_context, 512);
  auto h = load_model({test::shared("models/tinystories-656k"), ""});
  ASSERT_TRUE(h.ok()) << h.error().message;
  EXPECT_EQ(h.value()->config.rotaries[0].neox, true);
  EXPECT_TRUE(h.value()->config.tied_output);
  EXPECT_FLOAT_EQ(h.value()->config.norm_eps, 1e-6f);
  EXPECT_EQ(h.value()->vocab.kind, VocabKind::RankBpe);
  auto a = load_model({test::shared("models/aidreams260K/aidreams260K.bin"), ""});
  ASSERT_TRUE(a.ok()) << a.error().message;
  EXPECT_EQ(a.value()->config.trained_context, 128);
}

// A sliding window the ring could not hold is refused before anything is
// sized from it (the golden gemma3 file with its window rewritten).
TEST(Loader, SlidingWindowOutOfRangeIsAnError) {
  const std::string src = test::shared("golden/arch/gemma3/model.gguf");
  std::string bytes = test::read_file(src);
  ASSERT_FALSE(bytes.empty());
  const std::string key = "gemma3.attention.sliding_window";
  const auto at = bytes.find(key);
  ASSERT_NE(at, std::string::npos);
  // Key, then its value type (u32 = 4), then the value.
  uint32_t type = 0;
  std::memcpy(&type, bytes.data() + at + key.size(), 4);
  ASSERT_EQ(type, 4u);
  for (uint32_t w : {0x7fffffffu, 0xffffffffu}) {
    std::memcpy(bytes.data() + at + key.size() + 4, &w, 4);
    const std::string path = test::temp_path("swa.gguf");
    std::ofstream(path, std::ios::binary) << bytes;
    auto m = load_model({path, ""});
    std::remove(path.c_str());
    ASSERT_FALSE(m.ok()) << w;
    EXPECT_NE(m.error().message.find("sliding_window"), std::string::npos) << m.error().message;
  }
}

TEST(Loader, UnknownArchitectureListsSupportedOnes) {
  GgufWriter w;
  w.set_string("general.architecture", "mamba");
  const std::string path = test::temp_path("arch.gguf");
  ASSERT_TRUE(w.write(path).ok());
  auto m = load_model({path, ""});
  std::remove(path.c_str());
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.error().message.find("mamba"), std::string::npos);
  EXPECT_NE(m.error().message.find("qwen2"), std::string::npos);
}

TEST(Loader, MissingFilesAndWrongTokenizerAreErrors) {
  EXPECT_FALSE(load_model({"/nonexistent/model.gguf", ""}).ok());
  // tok512 has 512 entries; aidreams' tokenizer is a different 512-token vocab
  // (loads), but the Llama-2 tokenizer.bin has 32000 and cannot match.
  auto m = load_model(
      {test::shared("models/stories260K/stories260K.bin"), test::shared("models/llama2-tokenizer/tokenizer.bin")});
  EXPECT_TRUE(m.ok());  // reads the first 512 entries: the format cannot tell
  auto bad = load_model({test::shared("models/stories260K/stories260K.bin"), test::shared("data/PROVENANCE.md")});
  EXPECT_FALSE(bad.ok());
}

// Hyper-parameters from config.json that cannot fit the config's types (or
// make no sense) are load errors, not overflowing casts (a fuzzer found
// max_position_embeddings = 1e300 cast to int64).
TEST(Loader, HfConfigValuesOutOfRangeAreErrors) {
  namespace fs = std::filesystem;
  const fs::path src = test::shared("models/tinystories-656k");
  const fs::path dir = test::temp_path("hfcfg");
  fs::create_directories(dir);
  for (const char* f : {"model.safetensors", "tokenizer.json"}) fs::copy_file(src / f, dir / f);
  const auto base = nlohmann::json::parse(test::read_file((src / "config.json").string()));
  auto load_with = [&](const char* key, const nlohmann::json& value) {
    auto cfg = base;
    cfg[key] = value;
    std::ofstream(dir / "config.json") << cfg.dump();
    return load_model({dir.string(), ""});
  };
  EXPECT_TRUE(load_with("rope_theta", 10000.0).ok());  // the harness itself loads a good model
  for (const auto& [key, value] : std::vector<std::pair<const char*, nlohmann::json>>{
           {"max_position_embeddings", 1e300},
           {"max_position_embeddings", -5},
           {"rope_theta", 1e300},
           {"rope_theta", 0},
           {"rms_norm_eps", -1e-6},
           {"rms_norm_eps", "small"},
           {"head_dim", int64_t{1} << 40},
           {"head_dim", -8},
           {"num_key_value_heads", int64_t{1} << 33},
       }) {
    auto m = load_with(key, value);
    ASSERT_FALSE(m.ok()) << key << " = " << value.dump();
    EXPECT_NE(m.error().message.find(key), std::string::npos) << m.error().message;
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace ss
