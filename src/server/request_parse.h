#pragma once
// Parsing of completion request bodies (untrusted bytes from the network),
// apart from the HTTP plumbing so it can be fuzzed and tested alone.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "sample/gbnf.h"
#include "sample/json_schema.h"
#include "sample/sampler.h"
#include "server/chat_template.h"
#include "server/tool_calls.h"

namespace ss {

struct CompletionRequest {
  bool chat = false;
  std::vector<ChatMessage> messages;  // chat
  // Completions: one or more prompts, each text or token ids (used as given:
  // no BOS added). Choice i * n + j answers prompt i (OpenAI's order).
  struct Prompt {
    std::string text;
    std::vector<int32_t> ids;
    bool is_ids = false;
  };
  std::vector<Prompt> prompts;
  int n = 1;          // choices per prompt
  bool echo = false;  // completions: the prompt precedes the answer (and is scored with logprobs)
  // response_format json_object (any object) or json_schema: the answer is
  // one JSON text the schema accepts. Null: free text.
  std::shared_ptr<const JsonSchema> json_schema;
  // Or a GBNF grammar: llama.cpp's "grammar", vLLM's "guided_grammar" and
  // "guided_choice" (a grammar of the choices).
  std::shared_ptr<const Gbnf> grammar;
  // Chat with tools (server/tool_calls.h): json_schema is the tools' answer
  // shape, and the reply turns a call into `tool_calls`.
  bool tool_calls = false;
  std::string tools_text;  // their description, for the system message of a conversation's first turn
  ToolSetup tools;         // as asked (formats with their own tool syntax: gpt-oss)
  SamplingParams sampling;
  int64_t max_tokens = -1;
  std::vector<std::string> stop;
  bool stream = false;
  bool ignore_eos = false;  // generate past end-of-sequence (benchmarks, tests; as llama.cpp's server)
  std::string session_id;   // from the body; empty if absent
  // -1: no log-probabilities; else each token's and its `logprobs` best
  // alternatives (chat: logprobs true + top_logprobs; completions: logprobs N).
  int logprobs = -1;
};

// The most alternatives a request may ask for per token (OpenAI's 20).
inline constexpr int kMaxTopLogprobs = 20;
// Stop strings per request: OpenAI allows 4, vLLM and llama.cpp any number;
// lm-evaluation-harness sends a task's own list plus the end-of-text token.
inline constexpr int kMaxStops = 16;
// The most choices one request may ask for (prompts x n): each is a sequence.
inline constexpr int kMaxChoices = 64;
inline constexpr size_t kMaxChoicesListed = 1024;  // guided_choice entries

struct RequestError {
  std::string message;
  std::string param;  // the offending field, if one
};

// Either fills `out` and returns true, or fills `err` (always a 400).
// `tokens`: where a GBNF grammar's token references resolve (none: they are
// a 400).
bool parse_completion_body(const std::string& body, bool chat, int64_t max_tokens_limit, CompletionRequest& out,
                           RequestError& err, const GbnfTokens* tokens = nullptr);

}  // namespace ss
