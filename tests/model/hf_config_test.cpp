#include "model/hf_config.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "test_paths.h"

namespace ss {
namespace {

void write(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
}

// Llama 3 Instruct lists its end-of-turn ids in config.json and
// generation_config.json; Gemma 3 gives [1, 106]. Every one ends generation.
TEST(HfConfig, EosIdsFromBothFilesWithoutRepeats) {
  const std::string dir = test::temp_path("hf-eos");
  std::filesystem::create_directories(dir);
  write(dir + "/config.json", R"({"eos_token_id": 128001})");
  write(dir + "/generation_config.json", R"({"eos_token_id": [128001, 128008, 128009, -1, 999999, "x"]})");
  EXPECT_EQ(hf_eos_ids(dir, 128256), (std::vector<int32_t>{128001, 128008, 128009}));
  write(dir + "/config.json", R"({"eos_token_id": [1, 106]})");
  std::filesystem::remove(dir + "/generation_config.json");
  EXPECT_EQ(hf_eos_ids(dir, 262144), (std::vector<int32_t>{1, 106}));
  write(dir + "/config.json", "not json");
  EXPECT_TRUE(hf_eos_ids(dir, 100).empty());
  std::filesystem::remove_all(dir);
}

TEST(HfConfig, ChatTemplateAsStringOrNamedList) {
  const std::string dir = test::temp_path("hf-tmpl");
  std::filesystem::create_directories(dir);
  EXPECT_EQ(hf_chat_template(dir), "");
  write(dir + "/tokenizer_config.json", R"({"chat_template": "{{ bos_token }}<start_of_turn>"})");
  EXPECT_EQ(hf_chat_template(dir), "{{ bos_token }}<start_of_turn>");
  write(dir + "/tokenizer_config.json",
        R"({"chat_template": [{"name": "tool_use", "template": "A"}, {"name": "default", "template": "B"}]})");
  EXPECT_EQ(hf_chat_template(dir), "B");
  // Newer transformers save the template beside the config: the config's wins, then the .jinja file.
  write(dir + "/chat_template.jinja", "J");
  EXPECT_EQ(hf_chat_template(dir), "B");
  write(dir + "/tokenizer_config.json", R"({"bos_token": "<s>"})");
  EXPECT_EQ(hf_chat_template(dir), "J");
  std::filesystem::remove(dir + "/chat_template.jinja");
  write(dir + "/chat_template.json", R"({"chat_template": "P"})");
  EXPECT_EQ(hf_chat_template(dir), "P");
  write(dir + "/chat_template.json", R"(["not", "an object"])");
  EXPECT_EQ(hf_chat_template(dir), "");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace ss
