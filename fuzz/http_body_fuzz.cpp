// Completion request bodies as the server parses them, then rendered with
// each chat template; whatever the parser accepts is a valid sampling setup
// that the sampler runs without trapping, and a structured-output schema
// or GBNF grammar whose recognizer takes the body's own bytes (masks and
// feeds) without trapping.
#include <cstdlib>
#include <optional>
#include <vector>

#include "sample/constraint.h"
#include "sample/sampler.h"
#include "server/chat_template.h"
#include "server/harmony_tools.h"
#include "server/request_parse.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string body(reinterpret_cast<const char*>(data + 1), size - 1);
  ss::CompletionRequest r;
  ss::RequestError err;
  // Token references resolve in the vocabulary below (<s> is its token 0,
  // which ends generation; <[1]>..<[17]> are the others).
  static const ss::GbnfTokens refs = [] {
    ss::GbnfTokens t;
    t.vocab_size = 18;
    t.ends = {0};
    t.token_of = [](std::string_view text) -> std::optional<int32_t> {
      if (text == "<s>") return 0;
      return std::nullopt;
    };
    return t;
  }();
  const bool parsed = ss::parse_completion_body(body, (data[0] & 1) != 0, data[0] >> 4, r, err, &refs);
  if (parsed) {
    if (!r.sampling.validate().ok() || r.logprobs < -1 || r.logprobs > ss::kMaxTopLogprobs) std::abort();
    const std::vector<float> logits = {0.5f, -1.0f, 2.0f, 2.0f, 0.0f, -30.0f, 7.0f};
    const std::vector<int32_t> history = {6, 2, 2, 9, 0};
    ss::Sampler s(r.sampling);
    const int32_t t = s.sample(logits, history);
    if (t < 0 || t >= static_cast<int32_t>(logits.size())) std::abort();
  }
  if (parsed && (r.json_schema || r.grammar)) {
    static const ss::ConstraintVocab vocab({"", "{", "\"v\"", ":", "1", "[", "]", "}", " ", "\"a\"", ",", "null",
                                            "\n  ", "a", "ab", "\xC3", "\xA9", "\xC3\xA9"},
                                           {0});
    ss::Constraint c(r.json_schema, r.grammar);
    std::vector<float> logits(vocab.bytes().size());
    for (size_t i = 0; i < body.size() && i < 64; ++i) {
      if (c.mask(vocab, logits, true) > logits.size()) std::abort();
      const auto id = static_cast<int32_t>(static_cast<unsigned char>(body[i]) % vocab.bytes().size());
      if (!c.feed(std::string(1, body[i]))) (void)c.feed_token(id, vocab.bytes()[static_cast<size_t>(id)]);
      if (c.complete() && !c.can_end()) std::abort();
    }
  }
  if (parsed && r.chat) {
    for (auto fam : {ss::ChatFamily::Plain, ss::ChatFamily::Llama2, ss::ChatFamily::Llama3, ss::ChatFamily::ChatML,
                     ss::ChatFamily::Mistral, ss::ChatFamily::Zephyr, ss::ChatFamily::Gemma, ss::ChatFamily::Phi3,
                     ss::ChatFamily::GptOss})
      (void)ss::render_chat_turn(fam, r.messages, (data[0] & 2) != 0);
  }
  // gpt-oss's own tool calls: the tools' TypeScript, the call's shape over
  // Harmony text and the reply made of whatever it took.
  if (parsed && r.tool_calls) {
    (void)ss::render_chat_turn(ss::ChatFamily::GptOss, r.messages, true, "2026-12-07", {},
                               ss::harmony_tools_namespace(r.tools));
    auto plan = ss::harmony_tool_plan(r.tools);
    if (plan.ok()) {
      static const ss::ConstraintVocab vocab({"", "<|channel|>", "analysis", "final", "<|message|>", "<|end|>",
                                              "<|start|>assistant", "commentary to=functions.", " to=functions.",
                                              "{", "}", "\"a\"", ":", "1", "f", " json"},
                                             {0});
      ss::Constraint c(*plan);
      std::vector<float> logits(vocab.bytes().size());
      std::string text;
      for (size_t i = 0; i < body.size() && i < 64; ++i) {
        if (c.mask(vocab, logits, true) > logits.size()) std::abort();
        const auto id = static_cast<int32_t>(static_cast<unsigned char>(body[i]) % vocab.bytes().size());
        if (c.feed_token(id, vocab.bytes()[static_cast<size_t>(id)])) text += vocab.bytes()[static_cast<size_t>(id)];
        if (c.complete() && !c.can_end()) std::abort();
      }
      std::string finish = "stop";
      (void)ss::harmony_tool_reply_fields(text, finish, true);
    }
  }
  return 0;
}
