#include "model/vocab.h"

#include <array>
#include <cstdio>
#include <initializer_list>
#include <string_view>

namespace ss {

namespace {

// Token texts that end a turn in the chat formats of the models people run
// (llama.cpp's list, llama-vocab.cpp of b8183): a model that writes one has
// finished its answer whatever its eos id says.
constexpr std::array<std::string_view, 17> kEogTexts = {"<|eot_id|>",
                                                        "<|im_end|>",
                                                        "<|end|>",
                                                        "<|return|>",
                                                        "<|call|>",
                                                        "<|flush|>",
                                                        "<|calls|>",
                                                        "<end_of_turn>",
                                                        "<|endoftext|>",
                                                        "</s>",
                                                        "<|eom_id|>",
                                                        "<EOT>",
                                                        "_<EOT>",
                                                        "[EOT]",
                                                        "[EOS]",
                                                        "<|end_of_text|>",
                                                        "<end_of_utterance>"};

// gpt-oss (Harmony) writes these between the parts of an answer; llama.cpp
// renders them as text (user-defined) rather than hiding them as control.
constexpr std::array<std::string_view, 4> kHarmonyMarkers = {"<|channel|>", "<|message|>", "<|start|>",
                                                             "<|constrain|>"};

}  // namespace

void Vocab::finalize() {
  index_.clear();
  index_.reserve(pieces.size());
  for (int32_t i = 0; i < size(); ++i) index_.emplace(pieces[i], i);  // first wins on duplicates
  for (auto& b : byte_ids_) b = -1;
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "<0x%02X>", b);
    byte_ids_[b] = find(buf);
  }
  if (types.size() != pieces.size()) types.assign(pieces.size(), TokenType::Normal);
  if (scores.size() != pieces.size()) scores.assign(pieces.size(), 0.0f);

  eog_.assign(pieces.size(), 0);
  auto mark = [&](int32_t id) {
    if (id >= 0 && id < size()) eog_[static_cast<size_t>(id)] = 1;
  };
  // Every token with the text, as llama.cpp walks its whole text->id map.
  for (int32_t i = 0; i < size(); ++i) {
    const std::string& p = pieces[static_cast<size_t>(i)];
    for (std::string_view t : kEogTexts)
      if (p == t) {
        mark(i);
        if (types[static_cast<size_t>(i)] != TokenType::Control) types[static_cast<size_t>(i)] = TokenType::Control;
      }
    for (std::string_view t : kHarmonyMarkers)
      if (p == t) types[static_cast<size_t>(i)] = TokenType::UserDefined;
  }
  mark(eos);
  mark(eot);
  for (int32_t id : eog_extra) mark(id);
  // Harmony's <|end|> closes the analysis channel, not the answer: where
  // <|return|> and <|call|> (or solar-open's <|calls|> and <|flush|>) end
  // generation, <|end|> does not, and is shown as text.
  auto eog_text = [&](std::string_view t) {
    const int32_t id = find(std::string(t));
    return id >= 0 && eog_[static_cast<size_t>(id)] != 0;
  };
  const int32_t end_id = find("<|end|>");
  if (end_id >= 0 && eog_[static_cast<size_t>(end_id)] != 0 &&
      ((eog_text("<|return|>") && (eog_text("<|call|>") || eog_text("<|calls|>"))) ||
       ((eog_text("<|call|>") || eog_text("<|calls|>")) && eog_text("<|flush|>")))) {
    eog_[static_cast<size_t>(end_id)] = 0;
    types[static_cast<size_t>(end_id)] = TokenType::UserDefined;
  }
  harmony_return_ = harmony_end_ = -1;
  if (end_id >= 0 && find("<|return|>") >= 0 && find("<|channel|>") >= 0) {
    harmony_return_ = find("<|return|>");
    harmony_end_ = end_id;
  }
}

std::optional<PreTokenizer> pre_tokenizer_from_name(const std::string& n) {
  auto any = [&](std::initializer_list<std::string_view> names) {
    for (std::string_view x : names)
      if (n == x) return true;
    return false;
  };
  // The names llama.cpp (b8183) maps to each regex set we implement.
  if (any({"gpt-2",           "gpt2",     "phi-2",   "mpt",        "olmo",        "jais",       "trillion",
           "granite-docling", "jina-es",  "jina-de", "jina-v1-en", "jina-v2-es",  "jina-v2-de", "jina-v2-code",
           "roberta-bpe",     "gigachat", "a.x-4.0", "mellum",     "modern-bert", "exaone4"}))
    return PreTokenizer::Gpt2;
  if (any({"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2", "jina-v5-nano",
           "dbrx", "smaug-bpe", "glm4", "chatglm-bpe"}))
    return PreTokenizer::Llama3;
  if (any({"qwen2", "deepseek-r1-qwen", "kormo", "megrez", "stablelm2", "hunyuan", "solar-open"}))
    return PreTokenizer::Qwen2;
  if (any({"gpt-4o", "llama4", "kanana2", "minimax-m2"})) return PreTokenizer::Gpt4o;
  if (n == "tekken") return PreTokenizer::Tekken;
  if (any({"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b"}))
    return PreTokenizer::DigitsThenGpt2;
  if (n == "seed-coder") return PreTokenizer::SeedCoder;
  if (n == "deepseek-coder") return PreTokenizer::DeepseekCoder;
  if (n == "default") return PreTokenizer::Default;
  return std::nullopt;
}

const char* pre_tokenizer_name(PreTokenizer p) {
  switch (p) {
    case PreTokenizer::Llama3:
      return "llama-bpe";
    case PreTokenizer::Qwen2:
      return "qwen2";
    case PreTokenizer::Gpt4o:
      return "gpt-4o";
    case PreTokenizer::Tekken:
      return "tekken";
    case PreTokenizer::DigitsThenGpt2:
      return "starcoder";
    case PreTokenizer::SeedCoder:
      return "seed-coder";
    case PreTokenizer::DeepseekCoder:
      return "deepseek-coder";
    case PreTokenizer::Default:
      return "default";
    case PreTokenizer::None:
    case PreTokenizer::Gpt2:
      break;
  }
  return "gpt-2";
}

std::vector<int32_t> Vocab::eog_ids() const {
  std::vector<int32_t> ids;
  for (int32_t i = 0; i < static_cast<int32_t>(eog_.size()); ++i)
    if (eog_[static_cast<size_t>(i)] != 0) ids.push_back(i);
  return ids;
}

}  // namespace ss
