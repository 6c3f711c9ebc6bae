#pragma once
// Pieces of a Hugging Face model directory that more than one reader needs:
// the chat template (tokenizer_config.json) and the ids that end generation
// (config.json and generation_config.json).
#include <cstdint>
#include <string>
#include <vector>

namespace ss {

// tokenizer_config.json's chat_template: a string, or a list of named
// templates of which "default" is the one llama.cpp's converter keeps;
// without one, chat_template.jinja (what newer transformers save) or
// chat_template.json's, in gguf-py's order; "" when there is none.
std::string hf_chat_template(const std::string& dir);

// Every integer of eos_token_id (a number or a list) in config.json and
// generation_config.json, in that order, without repeats; ids outside
// [0, n_vocab) are left out (the caller reports a bad single eos).
std::vector<int32_t> hf_eos_ids(const std::string& dir, int64_t n_vocab);

}  // namespace ss
