// GBNF grammars and regexes as a client sends them (server "grammar",
// "guided_regex"): parsed (token references resolve in a small vocabulary
// whose token 0 has no bytes: <think> is it, <ab> is "ab"), then, if
// accepted, a matcher fed tokens the input's tail picks and masked at each
// step. The mask must allow exactly the tokens feeding takes (caps aside,
// which the matcher reports), and complete() must imply can_end().
// Mode bit 1 reads the text as a JSON schema's "pattern" instead (with a
// maxLength from the mode's high bits): the string's recognizer must allow
// exactly the tokens that feed.
// Input: a mode byte (bit 0: a regex), the text, a 0 byte, the bytes to feed.
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "sample/gbnf.h"
#include "sample/gbnf_matcher.h"
#include "sample/json_grammar.h"
#include "sample/json_schema.h"
#include "sample/regex_to_gbnf.h"
#include "sample/token_trie.h"

namespace {

const std::vector<std::string>& test_vocab() {
  static const std::vector<std::string> vocab = {
      "",         "a", "b",   "ab", " ", "\n", "\"",           "{",  "}", "0",  "12", "x", "\xC3", "\xA9",
      "\xC3\xA9", "-", "abc", ".",  "(", ")",  "\xE4\xB8\xAD", "\\", "u", "00", "e9", "n"};
  return vocab;
}

void pattern_string(const std::string& pattern, int max_length, const std::string& feed) {
  nlohmann::json schema = {{"type", "string"}, {"pattern", pattern}};
  if (max_length > 0) schema["maxLength"] = max_length;
  auto s = ss::JsonSchema::compile(schema);
  if (!s.ok()) return;
  const auto& vocab = test_vocab();
  ss::JsonGrammar g(*s);
  if (!g.feed("\"")) std::abort();
  std::vector<float> logits(vocab.size());
  for (size_t i = 0; i < feed.size() && i < 48 && !g.complete(); ++i) {
    std::fill(logits.begin(), logits.end(), 0.0f);
    if (g.mask(vocab, logits) > vocab.size()) std::abort();
    for (size_t id = 1; id < vocab.size(); ++id) {
      ss::JsonGrammar probe = g;
      if (probe.feed(vocab[id]) != (logits[id] == 0.0f)) std::abort();
    }
    if (!g.feed(feed.substr(i, 1))) (void)g.feed(vocab[static_cast<unsigned char>(feed[i]) % vocab.size()]);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string all(reinterpret_cast<const char*>(data + 1), size - 1);
  const size_t cut = all.find('\0');
  std::string text = all.substr(0, cut);
  const std::string feed = cut == std::string::npos ? std::string() : all.substr(cut + 1);
  if (data[0] & 2) {
    pattern_string(text, data[0] >> 2, feed);
    return 0;
  }
  if (data[0] & 1) {
    auto g = ss::regex_to_gbnf(text);
    if (!g.ok()) return 0;
    text = g.value();
  }
  const std::vector<std::string>& vocab = test_vocab();
  ss::GbnfTokens refs;
  refs.vocab_size = static_cast<int64_t>(vocab.size());
  refs.token_of = [](std::string_view t) -> std::optional<int32_t> {
    if (t == "<think>") return 0;
    if (t == "<ab>") return 3;
    return std::nullopt;
  };
  auto g = ss::Gbnf::parse(text, &refs);
  if (!g.ok()) return 0;
  static const ss::TokenTrie trie(vocab);
  ss::GbnfMatcher m(*g);
  std::vector<float> logits(vocab.size());
  // What m has taken: tokens, and (id -1) raw bytes read as text.
  std::vector<std::pair<int32_t, std::string>> fed;
  auto replay = [&](ss::GbnfMatcher& probe) {
    for (const auto& [id, bytes] : fed)
      if (!(id >= 0 ? probe.feed_token(id, bytes) : probe.feed(bytes))) return false;
    return !probe.dropped_parses();
  };
  for (size_t i = 0; i < feed.size() && i < 48; ++i) {
    std::fill(logits.begin(), logits.end(), 0.0f);
    const size_t allowed = m.mask(trie, logits, {});
    if (allowed > vocab.size()) std::abort();
    if (!m.dropped_parses() && !m.mask_was_cut())
      for (size_t id = 0; id < vocab.size(); ++id) {
        ss::GbnfMatcher probe(*g);
        if (!replay(probe)) break;
        const bool took = probe.feed_token(static_cast<int32_t>(id), vocab[id]);
        if (took != (logits[id] == 0.0f) && !probe.dropped_parses()) std::abort();
      }
    // Even steps a token the byte picks, odd ones the byte itself (any
    // byte, a character split anywhere).
    const auto id = static_cast<int32_t>(static_cast<unsigned char>(feed[i]) % vocab.size());
    if (i % 2 == 0 && m.feed_token(id, vocab[static_cast<size_t>(id)]))
      fed.emplace_back(id, vocab[static_cast<size_t>(id)]);
    else if (i % 2 == 1 && m.feed(feed.substr(i, 1)))
      fed.emplace_back(-1, feed.substr(i, 1));
    if (m.complete() && !m.can_end()) std::abort();
  }
  return 0;
}
