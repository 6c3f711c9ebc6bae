#pragma once
// The server's tokenizer endpoints, in the shapes clients already speak:
//  POST /tokenize    vLLM {"prompt", "add_special_tokens" (default true)} or
//                    llama.cpp {"content", "add_special" (default false),
//                    "with_pieces"}; "parse_special" (default true) for both
//                    -> {"tokens", "count", "max_model_len"}
//  POST /detokenize  {"tokens": [ids]} -> {"prompt", "content"} (vLLM's and
//                    llama.cpp's key for the same text)
//  GET /tokenizer_info  vLLM's: eos/bos/pad token texts, chat template, ...
// lm-evaluation-harness's remote tokenizer (its default when these answer)
// uses exactly /tokenizer_info, /tokenize and /detokenize.
#include <string>

#include "model/model.h"
#include "model/tokenizer.h"
#include "server/api.h"

namespace ss {

HttpReply tokenize_reply(const Tokenizer& tok, const Model& model, const std::string& body);
HttpReply detokenize_reply(const Tokenizer& tok, const std::string& body);
HttpReply tokenizer_info_reply(const Model& model);

}  // namespace ss
