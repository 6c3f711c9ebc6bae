// OpenAI's sampling and log-probability fields end to end: request parsing
// (types, ranges, aliases), logprobs against the engine's own scoring of the
// same tokens, streams against whole answers, logit_bias and penalties.
#include <gtest/gtest.h>

#include <cmath>
#include <regex>
#include <set>

#include "runtime/scoring.h"
#include "runtime_helpers.h"
#include "sample/gbnf_matcher.h"
#include "sample/json_grammar.h"
#include "server/request_parse.h"
#include "server_fixture.h"

namespace ss {
namespace {

using nlohmann::json;

CompletionRequest parse_ok(const json& body, bool chat) {
  CompletionRequest cr;
  RequestError err;
  EXPECT_TRUE(parse_completion_body(body.dump(), chat, 0, cr, err)) << body.dump() << ": " << err.message;
  return cr;
}

std::string parse_error(const json& body, bool chat) {
  CompletionRequest cr;
  RequestError err;
  if (parse_completion_body(body.dump(), chat, 0, cr, err)) return "";
  return err.message;
}

const json kChat = {{"messages", {{{"role", "user"}, {"content", "hi"}}}}};
const json kText = {{"prompt", "hi"}};

json with(json b, const json& extra) {
  b.update(extra);
  return b;
}

TEST(OpenAiFields, DefaultsAreOpenAisAndExtensionsAreRead) {
  const CompletionRequest d = parse_ok(kText, false);
  EXPECT_EQ(d.sampling.top_k, 0);
  EXPECT_EQ(d.sampling.min_p, 0.0f);
  EXPECT_EQ(d.sampling.repeat_penalty, 1.0f);
  EXPECT_EQ(d.sampling.frequency_penalty, 0.0f);
  EXPECT_EQ(d.logprobs, -1);
  EXPECT_EQ(d.max_tokens, -1);
  const CompletionRequest e = parse_ok(with(kText, {{"top_k", 5},
                                                    {"min_p", 0.1},
                                                    {"repetition_penalty", 1.3},
                                                    {"repeat_last_n", 256},
                                                    {"frequency_penalty", -0.5},
                                                    {"presence_penalty", 1.5},
                                                    {"logit_bias", {{"7", -100}, {"12", 2.5}}},
                                                    {"max_tokens", 9},
                                                    {"max_completion_tokens", 3}}),
                                       false);
  EXPECT_EQ(e.sampling.top_k, 5);
  EXPECT_FLOAT_EQ(e.sampling.min_p, 0.1f);
  EXPECT_FLOAT_EQ(e.sampling.repeat_penalty, 1.3f);
  EXPECT_EQ(e.sampling.repeat_last_n, 256);
  EXPECT_FLOAT_EQ(e.sampling.frequency_penalty, -0.5f);
  EXPECT_FLOAT_EQ(e.sampling.presence_penalty, 1.5f);
  ASSERT_EQ(e.sampling.logit_bias.size(), 2u);
  EXPECT_EQ(e.max_tokens, 3);                                                  // max_completion_tokens wins
  EXPECT_EQ(parse_ok(with(kText, {{"top_k", -1}}), false).sampling.top_k, 0);  // vLLM's "off"
  EXPECT_EQ(parse_ok(with(kText, {{"repeat_penalty", 1.1}}), false).sampling.repeat_penalty, 1.1f);
  // lm-eval's generation requests carry a task's stop list plus end-of-text: more than OpenAI's 4.
  EXPECT_EQ(
      parse_ok(with(kText, {{"stop", {"\n\n", "Question:", "</s>", "<|im_end|>", "Q:", "A:"}}}), false).stop.size(),
      6u);
}

TEST(OpenAiFields, LogprobsAreABooleanInChatAndACountInCompletions) {
  EXPECT_EQ(parse_ok(with(kChat, {{"logprobs", true}}), true).logprobs, 0);
  EXPECT_EQ(parse_ok(with(kChat, {{"logprobs", true}, {"top_logprobs", 20}}), true).logprobs, 20);
  EXPECT_EQ(parse_ok(with(kChat, {{"logprobs", false}}), true).logprobs, -1);
  EXPECT_EQ(parse_ok(with(kText, {{"logprobs", 0}}), false).logprobs, 0);
  EXPECT_EQ(parse_ok(with(kText, {{"logprobs", 5}}), false).logprobs, 5);
  EXPECT_EQ(parse_ok(with(kText, {{"logprobs", nullptr}, {"echo", false}}), false).logprobs, -1);
  EXPECT_TRUE(parse_ok(with(kText, {{"echo", true}}), false).echo);
  for (const json& bad : {with(kChat, {{"top_logprobs", 2}}), with(kChat, {{"logprobs", true}, {"top_logprobs", 21}}),
                          with(kChat, {{"logprobs", 1}}), with(kChat, {{"logprobs", true}, {"top_logprobs", "2"}})})
    EXPECT_NE(parse_error(bad, true), "") << bad.dump();
  for (const json& bad :
       {with(kText, {{"logprobs", true}}), with(kText, {{"logprobs", -1}}), with(kText, {{"logprobs", 21}}),
        with(kText, {{"top_logprobs", 1}}), with(kText, {{"echo", 1}})})
    EXPECT_NE(parse_error(bad, false), "") << bad.dump();
}

TEST(OpenAiFields, OutOfRangeOrMistypedSamplingFieldsAreRefused) {
  const json bad[] = {
      {{"top_k", 1.5}},
      {{"top_k", -2}},
      {{"min_p", 1.5}},
      {{"min_p", "0.1"}},
      {{"repeat_penalty", 0}},
      {{"repetition_penalty", -1}},
      {{"repeat_penalty", 1.1}, {"repetition_penalty", 1.1}},
      {{"repeat_last_n", 257}},
      {{"repeat_last_n", -1}},
      {{"frequency_penalty", 2.5}},
      {{"presence_penalty", -3}},
      {{"logit_bias", {{"5", 101}}}},
      {{"logit_bias", {{"-5", 1}}}},
      {{"logit_bias", {{"5x", 1}}}},
      {{"logit_bias", {{"", 1}}}},
      {{"logit_bias", {{"99999999999", 1}}}},
      {{"logit_bias", {{"5", "1"}}}},
      {{"logit_bias", json::array({1, 2})}},
      {{"max_completion_tokens", -1}},
      {{"stop", json::array({"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n", "o", "p", "q"})}},
      {{"max_completion_tokens", 2.5}},
  };
  for (const json& b : bad) EXPECT_NE(parse_error(with(kText, b), false), "") << b.dump();
  // What the server cannot do is refused, not ignored; the no-op forms pass.
  const json unsupported[] = {
      {{"response_format", {{"type", "json_schema"}, {"json_schema", json::object()}}}},
      {{"response_format", "json"}},
      {{"tools", {{{"type", "function"}, {"function", {{"name", "f"}}}}}}},
      {{"functions", {{{"name", "f"}}}}},
      {{"tool_choice", "required"}},
      {{"suffix", "tail"}},
      {{"best_of", 3}},
  };
  for (const json& b : unsupported) {
    EXPECT_NE(parse_error(with(kText, b), false), "") << b.dump();
    if (!b.contains("suffix") && !b.contains("tools")) {  // completions fields (tools: tool_calls_test.cpp)
      EXPECT_NE(parse_error(with(kChat, b), true), "") << b.dump();
    }
  }
  EXPECT_TRUE(parse_ok(with(kChat, {{"response_format", {{"type", "json_object"}}}}), true).json_schema);
  // llama.cpp's top-level json_schema, vLLM's guided_json (object or JSON
  // text) and structured_outputs.json; their grammar/regex/choice forms are refused.
  const json person = {{"type", "object"}, {"properties", {{"a", {{"type", "integer"}}}}}};
  for (const json& b : {json{{"json_schema", person}}, json{{"guided_json", person}},
                        json{{"guided_json", person.dump()}}, json{{"structured_outputs", {{"json", person}}}},
                        json{{"guided_json", person}, {"response_format", {{"type", "text"}}}}}) {
    const auto s = parse_ok(with(kText, b), false).json_schema;
    ASSERT_TRUE(s) << b.dump();
    JsonGrammar g(s);
    EXPECT_TRUE(g.feed("{\"a\":1}") && g.complete()) << b.dump();
    EXPECT_FALSE(JsonGrammar(s).feed("{\"b\"")) << b.dump();
  }
  for (const json& b :
       {json{{"json_schema", person}, {"guided_json", person}},
        json{{"guided_json", person}, {"response_format", {{"type", "json_object"}}}},
        json{{"guided_json", "{not json"}}, json{{"json_schema", {{"minimum", 1}}}}, json{{"guided_regex", "(a"}},
        json{{"guided_regex", 5}}, json{{"structured_outputs", {{"regex", "a\\1"}}}},
        json{{"structured_outputs", {{"json", person}}}, {"json_schema", person}}, json{{"grammar", "root ::= x"}},
        json{{"grammar", 3}}, json{{"guided_grammar", "root ::= ("}}, json{{"guided_choice", json::array()}},
        json{{"guided_choice", {1, 2}}}, json{{"grammar", "root ::= \"a\""}, {"json_schema", person}},
        json{{"guided_choice", {"a"}}, {"response_format", {{"type", "json_object"}}}}})
    EXPECT_NE(parse_error(with(kText, b), false), "") << b.dump();
  // GBNF grammars: llama.cpp's field, vLLM's (xgrammar reads GBNF), choices and regexes.
  for (const json& b : {json{{"grammar", "root ::= \"a\" | \"b\""}}, json{{"guided_grammar", "root ::= [ab]"}},
                        json{{"guided_choice", {"a", "b"}}}, json{{"structured_outputs", {{"choice", {"a", "b"}}}}},
                        json{{"structured_outputs", {{"grammar", "root ::= \"a\" | \"b\""}}}},
                        json{{"guided_regex", "^[ab]$"}}, json{{"structured_outputs", {{"regex", "a|b"}}}}}) {
    const auto r = parse_ok(with(kText, b), false);
    ASSERT_TRUE(r.grammar && !r.json_schema) << b.dump();
    GbnfMatcher m(r.grammar);
    EXPECT_TRUE(m.feed("b") && m.complete()) << b.dump();
    EXPECT_FALSE(GbnfMatcher(r.grammar).feed("c")) << b.dump();
  }
  EXPECT_FALSE(parse_ok(with(kText, {{"grammar", ""}}), false).grammar);  // empty: none, as in llama.cpp
  for (const json& b : {json{{"response_format", {{"type", "text"}}}}, json{{"tools", json::array()}},
                        json{{"tool_choice", "none"}}, json{{"suffix", ""}}, json{{"best_of", 1}}})
    EXPECT_EQ(parse_error(with(kChat, b), true), "") << b.dump();
  json many = json::object();
  for (int i = 0; i < 301; ++i) many[std::to_string(i)] = 1;
  EXPECT_NE(parse_error(with(kText, {{"logit_bias", many}}), false), "");
}

TEST(OpenAiFields, PromptsAreTextOrTokenIdsOrListsOfThem) {
  auto one = [](const json& body) {
    const CompletionRequest r = parse_ok(body, false);
    EXPECT_EQ(r.prompts.size(), 1u) << body.dump();
    return r.prompts.empty() ? CompletionRequest::Prompt{} : r.prompts[0];
  };
  EXPECT_EQ(one({{"prompt", "a b"}}).text, "a b");
  EXPECT_EQ(one({{"prompt", {"a b"}}}).text, "a b");
  EXPECT_TRUE(one({{"prompt", {1, 403, 407}}}).is_ids);
  EXPECT_EQ(one({{"prompt", {1, 403, 407}}}).ids, (std::vector<int32_t>{1, 403, 407}));
  EXPECT_EQ(one({{"prompt", {{1, 403}}}}).ids, (std::vector<int32_t>{1, 403}));
  EXPECT_TRUE(one({{"prompt", json::array()}}).is_ids);  // empty: BOS only, as ""
  const CompletionRequest many = parse_ok({{"prompt", {{1, 2}, {3}}}, {"n", 3}}, false);
  ASSERT_EQ(many.prompts.size(), 2u);
  EXPECT_EQ(many.prompts[1].ids, (std::vector<int32_t>{3}));
  EXPECT_EQ(many.n, 3);
  EXPECT_EQ(parse_ok({{"prompt", {"a", "b"}}}, false).prompts.size(), 2u);
  json too_many = json::array();
  for (int i = 0; i < kMaxChoices + 1; ++i) too_many.push_back("x");
  const json bad[] = {
      {{"prompt", {1, "a"}}},          {{"prompt", {1, -2}}},        {{"prompt", {1, 2.5}}},
      {{"prompt", {1, 4294967296LL}}}, {{"prompt", {{"a"}}}},        {{"prompt", 5}},
      {{"prompt", nullptr}},           {{"prompt", {{"x", 1}}}},     json::object(),
      {{"prompt", {"a", 5}}},          {{"prompt", too_many}},       {{"prompt", {"a", "b"}}, {"n", 33}},
      {{"prompt", "a"}, {"n", 0}},     {{"prompt", "a"}, {"n", 65}},
  };
  for (const json& b : bad) EXPECT_NE(parse_error(b, false), "") << b.dump();
}

// lm-evaluation-harness's loglikelihood request (token ids, echo, logprobs
// 1, max_tokens 1) scores a prompt longer than the server's window: the
// echoed logprobs are the perplexity tool's NLLs for that policy (sinks 4 +
// window 60), and a text prompt of the same tokens scores the same.
TEST(OpenAiFields, EchoedPromptLogprobsAreThePerplexityToolsScores) {
  auto model = test::stories_gguf();
  test::TestServer srv(model, test::default_sched());
  auto c = srv.client();
  std::vector<int32_t> ids = test::golden_tokens(*model);
  ids.resize(300);
  int status = 0;
  const json r = test::post(
      c, "/v1/completions",
      {{"prompt", json::array({ids})}, {"max_tokens", 1}, {"temperature", 0}, {"logprobs", 1}, {"echo", true}},
      &status);
  ASSERT_EQ(status, 200) << r.dump();
  const json& lp = r["choices"][0]["logprobs"];
  ASSERT_EQ(lp["token_logprobs"].size(), ids.size() + 1);
  EXPECT_TRUE(lp["token_logprobs"][0].is_null());
  EXPECT_TRUE(lp["top_logprobs"][0].is_null());

  EngineOptions eo;
  eo.kv_blocks = 64;
  Engine e(model, eo);
  auto nll = score_tokens(e, ids, StreamMode::cached(KvPolicy::sinks_window(4, 60)));
  ASSERT_TRUE(nll.ok());
  double sum = 0;
  for (size_t i = 1; i < ids.size(); ++i) {
    const double got = lp["token_logprobs"][i].get<double>();
    EXPECT_NEAR(got, -nll.value()[i - 1], 1e-4) << i;
    sum += got;
    const json& top = lp["top_logprobs"][i];
    ASSERT_EQ(top.size(), 1u);
    EXPECT_GE(top.begin().value().get<double>(), got - 1e-6);
  }
  double want = 0;
  for (double v : nll.value()) want -= v;
  EXPECT_NEAR(sum, want, 1e-3);
  // The text is the prompt's decode followed by the answer.
  Tokenizer tok(model->vocab);
  const std::string text = r["choices"][0]["text"].get<std::string>();
  EXPECT_EQ(text.rfind(tok.decode(ids), 0), 0u);
  EXPECT_GT(text.size(), tok.decode(ids).size());

  // The same tokens as text: the same scores (BOS added by the server).
  const std::string prompt = tok.decode(ids);
  ASSERT_EQ(tok.encode(prompt, true), ids);
  const json t = test::post(c, "/v1/completions",
                            {{"prompt", prompt}, {"max_tokens", 0}, {"logprobs", 0}, {"echo", true}}, &status);
  ASSERT_EQ(status, 200) << t.dump();
  EXPECT_EQ(t["choices"][0]["text"], prompt);
  ASSERT_EQ(t["choices"][0]["logprobs"]["token_logprobs"].size(), ids.size());
  for (size_t i = 1; i < ids.size(); ++i)
    EXPECT_EQ(t["choices"][0]["logprobs"]["token_logprobs"][i], lp["token_logprobs"][i]) << i;

  // A session that starts with the same tokens holds shared sink blocks; a
  // scored prompt must not adopt them (their tokens' logits would be skipped).
  const json held = test::post(c, "/v1/completions",
                               {{"prompt", json::array({ids})}, {"max_tokens", 1}, {"session_id", "holder"}}, &status);
  ASSERT_EQ(status, 200) << held.dump();
  const json again = test::post(c, "/v1/completions",
                                {{"prompt", json::array({ids})}, {"max_tokens", 0}, {"logprobs", 0}, {"echo", true}});
  EXPECT_EQ(again["choices"][0]["logprobs"]["token_logprobs"], t["choices"][0]["logprobs"]["token_logprobs"]);

  // Echo without logprobs: text only; an id past the vocabulary: 400.
  const json plain = test::post(c, "/v1/completions", {{"prompt", "Lily"}, {"max_tokens", 3}, {"echo", true}});
  EXPECT_EQ(plain["choices"][0]["text"].get<std::string>().rfind("Lily", 0), 0u);
  EXPECT_FALSE(plain["choices"][0].contains("logprobs"));
  test::post(c, "/v1/completions", {{"prompt", {1, 512}}}, &status);
  EXPECT_EQ(status, 400);
}

// A hand-templated completion prompt: special-token texts become those
// tokens (llama.cpp's server tokenizes with parse_special, vLLM's HF
// tokenizer too), so "</s>" in a prompt is the end-of-sequence token.
TEST(OpenAiFields, CompletionPromptsParseSpecialTokenTexts) {
  auto model = test::stories_gguf();
  test::TestServer srv(model, test::default_sched());
  auto c = srv.client();
  Tokenizer tok(model->vocab);
  const std::string prompt = "Lily had a cat.</s><s>Once upon";
  const std::vector<int32_t> want = tok.encode(prompt, true, true);
  ASSERT_NE(std::find(want.begin(), want.end(), model->vocab.eos), want.end());
  const json r =
      test::post(c, "/v1/completions", {{"prompt", prompt}, {"max_tokens", 0}, {"logprobs", 0}, {"echo", true}});
  const json& toks = r["choices"][0]["logprobs"]["tokens"];
  ASSERT_EQ(toks.size(), want.size()) << r.dump();
  EXPECT_EQ(r["usage"]["prompt_tokens"], want.size());
  size_t named = 0;
  for (const json& t : toks) named += t == "</s>" || t == "<s>";
  EXPECT_EQ(named, 3u);  // BOS, the </s> and the <s> of the text
}

// Every generated token's logprob is the model's log-softmax at that step:
// the engine scoring prompt + answer in one dense pass is the oracle
// (positions stay under the server's 64-token window, so sinks = dense).
TEST(OpenAiFields, LogprobsEqualTheEnginesScoringOfTheSameTokens) {
  auto model = test::stories_gguf();
  test::TestServer srv(model, test::default_sched());
  auto c = srv.client();
  const std::string prompt = "Once upon a time";
  const int n = 24, top = 3;
  int status = 0;
  const json r = test::post(c, "/v1/completions",
                            {{"prompt", prompt}, {"max_tokens", n}, {"temperature", 0}, {"logprobs", top}}, &status);
  ASSERT_EQ(status, 200) << r.dump();
  const json& lp = r["choices"][0]["logprobs"];
  ASSERT_EQ(lp["tokens"].size(), static_cast<size_t>(n));

  Tokenizer tok(model->vocab);
  const std::vector<int32_t> prompt_ids = tok.encode(prompt, model->vocab.add_bos);
  EngineOptions eo;
  eo.kv_blocks = 64;
  Engine e(model, eo);
  const std::vector<int32_t> answer = test::greedy(e, KvPolicy::dense(), prompt_ids, n);
  std::vector<int32_t> all = prompt_ids;
  all.insert(all.end(), answer.begin(), answer.end());
  auto nll = score_tokens(e, all, StreamMode::cached(KvPolicy::dense()));
  ASSERT_TRUE(nll.ok());
  std::string joined;
  for (int i = 0; i < n; ++i) {
    const std::string text = lp["tokens"][i].get<std::string>();
    EXPECT_EQ(text, tok.token_bytes(answer[static_cast<size_t>(i)])) << i;
    joined += text;
    const double got = lp["token_logprobs"][i].get<double>();
    EXPECT_NEAR(got, -nll.value()[prompt_ids.size() - 1 + static_cast<size_t>(i)], 1e-4) << i;
    const json& alts = lp["top_logprobs"][i];
    ASSERT_GE(alts.size(), 1u);
    ASSERT_LE(alts.size(), static_cast<size_t>(top));
    double best = -INFINITY, mass = 0;
    for (const auto& [t, v] : alts.items()) {
      best = std::max(best, v.get<double>());
      mass += std::exp(v.get<double>());
    }
    EXPECT_EQ(best, got) << i;  // greedy: the pick is the likeliest
    EXPECT_EQ(alts[text].get<double>(), got) << i;
    EXPECT_LE(mass, 1.0 + 1e-6);
  }
  EXPECT_EQ(joined, r["choices"][0]["text"].get<std::string>());
}

using test::sse_chunks;

TEST(OpenAiFields, StreamedLogprobsAreTheWholeAnswersInOrder) {
  test::TestServer srv(test::stories_gguf(), test::default_sched());
  auto c = srv.client();
  // A stop string holds text back, so some tokens' logprobs arrive before their text.
  json body = {{"messages", {{{"role", "user"}, {"content", "Lily had a cat."}}}},
               {"max_completion_tokens", 30},
               {"temperature", 0},
               {"logprobs", true},
               {"top_logprobs", 2},
               {"stop", " the zzz"}};
  const json whole = test::post(c, "/v1/chat/completions", body);
  const json& want = whole["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(want.size(), 30u);
  body["stream"] = true;
  auto r = c.Post("/v1/chat/completions", httplib::Headers{}, body.dump(), "application/json");
  ASSERT_TRUE(r);
  json got = json::array();
  std::string text, from_tokens;
  for (const json& ch : sse_chunks(r->body)) {
    const json& choice = ch["choices"][0];
    ASSERT_TRUE(choice.contains("logprobs"));
    if (choice["delta"].contains("content")) text += choice["delta"]["content"].get<std::string>();
    if (choice["logprobs"].is_null()) continue;
    for (const json& e : choice["logprobs"]["content"]) got.push_back(e);
  }
  EXPECT_EQ(got, want);
  for (const json& e : want) {
    from_tokens += e["token"].get<std::string>();
    std::string bytes;
    for (const json& b : e["bytes"]) bytes += static_cast<char>(b.get<int>());
    EXPECT_EQ(bytes, e["token"].get<std::string>());
    ASSERT_EQ(e["top_logprobs"].size(), 2u);
    EXPECT_EQ(e["top_logprobs"][0]["logprob"], e["logprob"]);
  }
  EXPECT_EQ(text, whole["choices"][0]["message"]["content"].get<std::string>());
  EXPECT_EQ(from_tokens, text);
  // Without the fields, no logprobs key at all (as before).
  const json plain =
      test::post(c, "/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"max_tokens", 2}});
  EXPECT_FALSE(plain["choices"][0].contains("logprobs"));
}

// n choices and several prompts: each choice is what a request of its own
// (its prompt, seed + j) answers; streams interleave choices by index and
// end with one usage chunk and one [DONE].
TEST(OpenAiFields, ChoicesAreTheirOwnRequestsAnswersWholeAndStreamed) {
  test::TestServer srv(test::stories_gguf(), test::default_sched());
  auto c = srv.client();
  const json prompts = {"Once upon a time", "Lily had a cat"};
  json body = {{"prompt", prompts}, {"n", 3}, {"max_tokens", 12}, {"temperature", 1.0}, {"seed", 77}, {"logprobs", 1}};
  int status = 0;
  const json whole = test::post(c, "/v1/completions", body, &status);
  ASSERT_EQ(status, 200) << whole.dump();
  ASSERT_EQ(whole["choices"].size(), 6u);
  int64_t completion_tokens = 0, prompt_tokens = 0;
  std::set<std::string> distinct;
  for (int i = 0; i < 6; ++i) {
    const json& ch = whole["choices"][i];
    EXPECT_EQ(ch["index"], i);
    json one = {
        {"prompt", prompts[i / 3]}, {"max_tokens", 12}, {"temperature", 1.0}, {"seed", 77 + i % 3}, {"logprobs", 1}};
    const json alone = test::post(c, "/v1/completions", one);
    EXPECT_EQ(ch["text"], alone["choices"][0]["text"]) << i;
    // Batches of six rows and of one may round differently on some CPUs:
    // the same tokens, logprobs within 1e-4.
    EXPECT_EQ(ch["logprobs"]["tokens"], alone["choices"][0]["logprobs"]["tokens"]) << i;
    const json& got_lp = ch["logprobs"]["token_logprobs"];
    const json& want_lp = alone["choices"][0]["logprobs"]["token_logprobs"];
    ASSERT_EQ(got_lp.size(), want_lp.size()) << i;
    for (size_t k = 0; k < got_lp.size(); ++k)
      EXPECT_NEAR(got_lp[k].get<double>(), want_lp[k].get<double>(), 1e-4) << i << " " << k;
    completion_tokens += alone["usage"]["completion_tokens"].get<int64_t>();
    if (i % 3 == 0) prompt_tokens += alone["usage"]["prompt_tokens"].get<int64_t>();
    distinct.insert(ch["text"].get<std::string>());
  }
  EXPECT_GE(distinct.size(), 4u);  // different seeds sample different answers
  EXPECT_EQ(whole["usage"]["completion_tokens"], completion_tokens);
  EXPECT_EQ(whole["usage"]["prompt_tokens"], prompt_tokens);

  body["stream"] = true;
  auto r = c.Post("/v1/completions", httplib::Headers{}, body.dump(), "application/json");
  ASSERT_TRUE(r);
  std::vector<std::string> texts(6);
  int finishes = 0, usage_chunks = 0;
  for (const json& ch : sse_chunks(r->body)) {
    if (ch["choices"].empty()) {
      ++usage_chunks;
      EXPECT_EQ(ch["usage"], whole["usage"]);
      continue;
    }
    EXPECT_FALSE(ch.contains("usage"));
    const int i = ch["choices"][0]["index"].get<int>();
    ASSERT_TRUE(i >= 0 && i < 6);
    texts[static_cast<size_t>(i)] += ch["choices"][0]["text"].get<std::string>();
    finishes += !ch["choices"][0]["finish_reason"].is_null();
  }
  EXPECT_EQ(usage_chunks, 1);
  EXPECT_EQ(finishes, 6);
  size_t done = 0;
  for (size_t pos = 0; (pos = r->body.find("data: [DONE]", pos)) != std::string::npos; ++pos) ++done;
  EXPECT_EQ(done, 1u);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(texts[static_cast<size_t>(i)], whole["choices"][i]["text"]) << i;

  // Chat takes n too; a session takes neither n > 1 nor several prompts.
  const json chat = test::post(c, "/v1/chat/completions",
                               {{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"n", 2}, {"max_tokens", 4}});
  ASSERT_EQ(chat["choices"].size(), 2u);
  EXPECT_EQ(chat["choices"][1]["index"], 1);
  EXPECT_TRUE(chat["choices"][1]["message"]["content"].is_string());
  test::post(c, "/v1/completions", {{"prompt", "a"}, {"n", 2}, {"session_id", "s"}}, &status);
  EXPECT_EQ(status, 400);
  test::post(c, "/v1/completions", {{"prompt", {"a", "b"}}, {"session_id", "s"}}, &status);
  EXPECT_EQ(status, 400);
}

// lm-evaluation-harness batches loglikelihood requests: several token-id
// prompts with echo; each choice scores its own prompt.
TEST(OpenAiFields, BatchedEchoPromptsScoreEachPrompt) {
  auto model = test::stories_gguf();
  test::TestServer srv(model, test::default_sched());
  auto c = srv.client();
  std::vector<int32_t> ids = test::golden_tokens(*model);
  const std::vector<std::vector<int32_t>> prompts = {
      {ids.begin(), ids.begin() + 40}, {ids.begin() + 40, ids.begin() + 70}, {ids.begin(), ids.begin() + 90}};
  const json batch =
      test::post(c, "/v1/completions",
                 {{"prompt", prompts}, {"max_tokens", 1}, {"temperature", 0}, {"logprobs", 1}, {"echo", true}});
  ASSERT_EQ(batch["choices"].size(), 3u) << batch.dump();
  for (size_t i = 0; i < prompts.size(); ++i) {
    const json alone = test::post(c, "/v1/completions",
                                  {{"prompt", json::array({prompts[i]})},
                                   {"max_tokens", 1},
                                   {"temperature", 0},
                                   {"logprobs", 1},
                                   {"echo", true}});
    const json& got = batch["choices"][i]["logprobs"]["token_logprobs"];
    const json& want = alone["choices"][0]["logprobs"]["token_logprobs"];
    ASSERT_EQ(got.size(), prompts[i].size() + 1) << i;
    EXPECT_TRUE(got[0].is_null());
    for (size_t k = 1; k < got.size(); ++k) EXPECT_NEAR(got[k].get<double>(), want[k].get<double>(), 1e-4) << i;
    EXPECT_EQ(batch["choices"][i]["text"], alone["choices"][0]["text"]);
  }
}

// JSON mode: every answer is a prefix of a JSON object (cut by max_tokens)
// or, once the object closes, exactly one JSON object and the end. A bias
// toward '}' makes this tiny story model close its objects.
TEST(OpenAiFields, JsonModeAnswersAreJsonObjects) {
  auto model = test::stories_gguf();
  test::TestServer srv(model, test::default_sched());
  auto c = srv.client();
  Tokenizer tok(model->vocab);
  json close_bias = json::object();
  for (int32_t id = 0; id < model->vocab.size(); ++id)
    if (tok.token_bytes(id) == "}") close_bias[std::to_string(id)] = 12;
  ASSERT_FALSE(close_bias.empty());
  int closed = 0, cut = 0;
  for (int seed = 1; seed <= 16; ++seed) {
    for (const bool biased : {false, true}) {
      json body = {{"prompt", "Once upon a time"},
                   {"max_tokens", 300},
                   {"temperature", 1.0},
                   {"seed", seed},
                   {"response_format", {{"type", "json_object"}}}};
      if (biased) body["logit_bias"] = close_bias;
      int status = 0;
      const json r = test::post(c, "/v1/completions", body, &status);
      ASSERT_EQ(status, 200) << r.dump();
      const std::string text = r["choices"][0]["text"].get<std::string>();
      const std::string reason = r["choices"][0]["finish_reason"].get<std::string>();
      JsonGrammar g;
      EXPECT_TRUE(g.feed(text)) << text;
      if (reason == "stop") {
        ++closed;
        EXPECT_TRUE(g.complete()) << text;
        const json parsed = json::parse(text, nullptr, false);
        EXPECT_TRUE(!parsed.is_discarded() && parsed.is_object()) << text;
        EXPECT_EQ(text.back(), '}');
      } else {
        ++cut;
        EXPECT_EQ(reason, "length");
        EXPECT_FALSE(g.complete());
      }
    }
  }
  EXPECT_GE(closed, 12);  // the biased half closes (measured: all 16)
  EXPECT_GE(cut, 8);      // the unbiased half runs to max_tokens
  // Chat too, several choices at once.
  const json chat = test::post(c, "/v1/chat/completions",
                               {{"messages", {{{"role", "user"}, {"content", "Tell me about Lily."}}}},
                                {"n", 3},
                                {"max_tokens", 300},
                                {"seed", 5},
                                {"logit_bias", close_bias},
                                {"response_format", {{"type", "json_object"}}}});
  ASSERT_EQ(chat["choices"].size(), 3u) << chat.dump();
  for (const json& ch : chat["choices"]) {
    const std::string text = ch["message"]["content"].get<std::string>();
    JsonGrammar g;
    EXPECT_TRUE(g.feed(text)) << text;
    if (ch["finish_reason"] == "stop") {
      EXPECT_TRUE(json::parse(text, nullptr, false).is_object()) << text;
    }
  }
}

// gpt-oss answers in Harmony's channels: reasoning first, then the final
// text, which the schema holds (harmony_final_lead()). stories260K under the
// gpt-oss template spells the markers as text; a bias toward the bytes of
// <|end|> makes its reasoning close now and then (measured: 3 of 12 seeds
// within 1500 tokens, natively and under SINKSTREAM_CPU=avx2).
TEST(OpenAiFields, GptOssStructuredOutputShapesTheFinalChannel) {
  auto model = test::stories_gguf();
  ServerOptions harmony;
  harmony.chat = ChatFamily::GptOss;
  test::TestServer oss(model, test::default_sched(), harmony);
  auto c = oss.client();
  const Tokenizer tok(model->vocab);
  json bias = json::object();
  for (const char* t : {"<", "|", ">"}) bias[std::to_string(tok.vocab().find(t))] = 30;
  bias[std::to_string(tok.vocab().find("end"))] = 18;
  const json schema = {
      {"type", "object"},
      {"properties", {{"name", {{"type", "string"}, {"maxLength", 12}}}, {"age", {{"type", "integer"}}}}},
      {"required", {"name", "age"}},
      {"additionalProperties", false}};
  int closed = 0;
  for (int seed = 1; seed <= 12; ++seed) {
    int status = 0;
    const json r = test::post(c, "/v1/chat/completions",
                              {{"messages", {{{"role", "user"}, {"content", "Tell me about Lily."}}}},
                               {"max_tokens", 1500},
                               {"seed", seed},
                               {"logit_bias", bias},
                               {"response_format", {{"type", "json_schema"}, {"json_schema", {{"schema", schema}}}}}},
                              &status);
    ASSERT_EQ(status, 200) << r.dump();
    const json& ch = r["choices"][0];
    const std::string content = ch["message"]["content"].is_string() ? ch["message"]["content"].get<std::string>() : "";
    if (ch["finish_reason"] != "stop") {
      EXPECT_EQ(ch["finish_reason"], "length");
      continue;
    }
    ++closed;
    const json v = json::parse(content, nullptr, false);
    ASSERT_TRUE(v.is_object()) << content;
    EXPECT_EQ(v.size(), 2u) << content;
    EXPECT_TRUE(v["age"].is_number_integer()) << content;
    ASSERT_TRUE(v["name"].is_string()) << content;
    EXPECT_LE(utf8_chars(v["name"].get<std::string>()).size(), 12u) << content;
  }
  std::printf("gpt-oss answers that reached the final channel and closed: %d of 12\n", closed);
  EXPECT_GE(closed, 1);
  // Tools: harmony_tools_test.cpp.
}

std::string greedy_text(httplib::Client& c, json extra, int n) {
  json body = {{"prompt", "Once upon a time"}, {"max_tokens", n}, {"temperature", 0}};
  if (extra.is_object()) body.update(extra);
  int status = 0;
  const json r = test::post(c, "/v1/completions", body, &status);
  EXPECT_EQ(status, 200) << r.dump();
  return r["choices"][0]["text"].get<std::string>();
}

// A completion continues its prompt: prompt + text is what the tokenizer
// decodes for prompt + answer ids. The server used to drop SentencePiece's
// word-start space of the answer's first token ("Once upon a" + "time").
// response_format json_schema (and llama.cpp's json_object + schema): every
// answer is a prefix of a text the schema accepts, and a finished one is
// such a text; a schema the server cannot honour is a 400 naming its place.
TEST(OpenAiFields, JsonSchemaAnswersFollowTheSchema) {
  auto model = test::stories_gguf();
  test::TestServer srv(model, test::default_sched());
  auto c = srv.client();
  const json person = {{"type", "object"},
                       {"properties",
                        {{"name", {{"type", "string"}, {"maxLength", 12}}},
                         {"age", {{"type", "integer"}}},
                         {"good", {{"type", "boolean"}}}}},
                       {"required", {"name", "age", "good"}},
                       {"additionalProperties", false}};
  const auto compiled = JsonSchema::compile(person);
  ASSERT_TRUE(compiled.ok());
  int closed = 0;
  for (int seed = 1; seed <= 8; ++seed) {
    int status = 0;
    const json r = test::post(
        c, "/v1/completions",
        {{"prompt", "Once upon a time"},
         {"max_tokens", 200},
         {"temperature", 1.0},
         {"seed", seed},
         {"response_format",
          {{"type", "json_schema"}, {"json_schema", {{"name", "person"}, {"schema", person}, {"strict", true}}}}}},
        &status);
    ASSERT_EQ(status, 200) << r.dump();
    const std::string text = r["choices"][0]["text"].get<std::string>();
    JsonGrammar g(compiled.value());
    EXPECT_TRUE(g.feed(text)) << text;
    if (r["choices"][0]["finish_reason"] != "stop") continue;
    ++closed;
    EXPECT_TRUE(g.complete()) << text;
    const json v = json::parse(text, nullptr, false);
    ASSERT_TRUE(v.is_object()) << text;
    EXPECT_EQ(v.size(), 3u) << text;
    EXPECT_TRUE(v["name"].is_string() && v["age"].is_number_integer() && v["good"].is_boolean()) << text;
    EXPECT_LE(v["name"].get<std::string>().size(), 12u * 4) << text;
  }
  EXPECT_GE(closed, 6) << "answers that closed within 200 tokens (measured: 8 of 8, 48-69 tokens)";
  // llama.cpp's form, and a chat; a top-level array.
  const json arr = {{"type", "array"}, {"items", {{"type", "integer"}}}, {"minItems", 1}, {"maxItems", 3}};
  const json chat = test::post(c, "/v1/chat/completions",
                               {{"messages", {{{"role", "user"}, {"content", "Count."}}}},
                                {"max_tokens", 120},
                                {"seed", 3},
                                {"response_format", {{"type", "json_object"}, {"schema", arr}}}});
  const std::string a = chat["choices"][0]["message"]["content"].get<std::string>();
  JsonGrammar ga(JsonSchema::compile(arr).value());
  EXPECT_TRUE(ga.feed(a)) << a;
  if (chat["choices"][0]["finish_reason"] == "stop") {
    const json v = json::parse(a, nullptr, false);
    EXPECT_TRUE(v.is_array() && !v.empty() && v.size() <= 3) << a;
  }
  // A top-level number may end at end-of-generation or where its digits run out.
  for (int seed = 1; seed <= 4; ++seed) {
    const json r = test::post(
        c, "/v1/completions",
        {{"prompt", "The number is"},
         {"max_tokens", 40},
         {"seed", seed},
         {"response_format", {{"type", "json_schema"}, {"json_schema", {{"schema", {{"type", "integer"}}}}}}}});
    const std::string text = r["choices"][0]["text"].get<std::string>();
    JsonGrammar gn(JsonSchema::compile({{"type", "integer"}}).value());
    EXPECT_TRUE(gn.feed(text)) << text;
    if (r["choices"][0]["finish_reason"] == "stop") {
      EXPECT_TRUE(json::parse(text, nullptr, false).is_number_integer()) << text;
    }
  }
  // Patterns (JSON Schema's: found anywhere unless anchored) and a number's
  // bounds and multipleOf, checked on the finished answers' text.
  const json coded = {
      {"type", "object"},
      {"properties",
       {{"code", {{"type", "string"}, {"pattern", "^[A-Z]{2}-\\d{3}$"}}},
        {"note", {{"type", "string"}, {"pattern", "cat"}, {"maxLength", 16}}},
        {"price", {{"type", "number"}, {"exclusiveMinimum", 1}, {"maximum", 50}, {"multipleOf", 0.05}}}}},
      {"required", {"code", "note", "price"}},
      {"additionalProperties", false}};
  int coded_closed = 0;
  for (int seed = 1; seed <= 4; ++seed) {
    const json r = test::post(c, "/v1/completions",
                              {{"prompt", "Once upon a time"},
                               {"max_tokens", 120},
                               {"seed", seed},
                               {"response_format", {{"type", "json_schema"}, {"json_schema", {{"schema", coded}}}}}});
    const std::string text = r["choices"][0]["text"].get<std::string>();
    JsonGrammar gc(JsonSchema::compile(coded).value());
    EXPECT_TRUE(gc.feed(text)) << text;
    if (r["choices"][0]["finish_reason"] != "stop") continue;
    ++coded_closed;
    const json v = json::parse(text, nullptr, false);
    ASSERT_TRUE(v.is_object()) << text;
    EXPECT_TRUE(std::regex_match(v["code"].get<std::string>(), std::regex("[A-Z]{2}-[0-9]{3}"))) << text;
    EXPECT_TRUE(std::regex_search(v["note"].get<std::string>(), std::regex("cat"))) << text;
    // The price's own text: exactly a multiple of 0.05 in (1, 50].
    const std::regex price_text(R"("price"\s*:\s*(\d+)(?:\.(\d+))?)");
    std::smatch m;
    ASSERT_TRUE(std::regex_search(text, m, price_text)) << text;
    const std::string frac = m[2].str() + "00";
    const long long cents = std::stoll(m[1].str()) * 100 + std::stoll(frac.substr(0, 2));
    EXPECT_TRUE(frac.find_first_not_of('0', 2) == std::string::npos && cents % 5 == 0 && cents > 100 && cents <= 5000)
        << text;
  }
  std::printf("pattern answers closed: %d of 4\n", coded_closed);
  EXPECT_GE(coded_closed, 3) << "answers that closed within 120 tokens (measured: 4 of 4)";
  // What the server cannot honour, before any work.
  int status = 0;
  json bad = person;
  bad["properties"]["age"]["multipleOf"] = 1e-20;  // finer than a schema number has digits
  const json refused = test::post(
      c, "/v1/completions",
      {{"prompt", "x"}, {"response_format", {{"type", "json_schema"}, {"json_schema", {{"schema", bad}}}}}}, &status);
  EXPECT_EQ(status, 400);
  EXPECT_EQ(refused["error"]["param"], "response_format");
  EXPECT_NE(refused["error"]["message"].get<std::string>().find("/properties/age"), std::string::npos)
      << refused.dump();
  for (const json& f : {json{{"type", "json_schema"}}, json{{"type", "json_schema"}, {"json_schema", {{"schema", 3}}}},
                        json{{"type", "json_object"}, {"schema", {{"$ref", "#/nowhere"}}}}}) {
    test::post(c, "/v1/chat/completions",
               {{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"response_format", f}}, &status);
    EXPECT_EQ(status, 400) << f.dump();
  }
}

TEST(OpenAiFields, GrammarAnswersFollowTheGrammar) {
  auto model = test::stories_gguf();
  test::TestServer srv(model, test::default_sched());
  auto c = srv.client();
  const std::string sentence =
      "root ::= \" \" name \" was \" (\"happy\" | \"sad\" | \"big\") \".\"\nname ::= [A-Z] [a-z]{1,8}\n";
  auto g = Gbnf::parse(sentence);
  ASSERT_TRUE(g.ok()) << g.error().message;
  std::set<std::string> answers;
  for (int seed = 1; seed <= 6; ++seed) {
    int status = 0;
    const json r = test::post(c, "/v1/completions",
                              {{"prompt", "Once upon a time"},
                               {"max_tokens", 40},
                               {"temperature", 1.0},
                               {"seed", seed},
                               {"grammar", sentence}},
                              &status);
    ASSERT_EQ(status, 200) << r.dump();
    const std::string text = r["choices"][0]["text"].get<std::string>();
    GbnfMatcher m(*g);
    EXPECT_TRUE(m.feed(text)) << text;
    EXPECT_TRUE(m.complete()) << text;  // at most 13 tokens of bytes: it closes well inside 40
    EXPECT_EQ(r["choices"][0]["finish_reason"], "stop") << text;
    answers.insert(text);
  }
  EXPECT_GE(answers.size(), 2u) << "sampling still chooses inside the grammar";
  // vLLM's choices on chat, and a grammar streamed (structured_outputs).
  const std::vector<std::string> choices = {"yes", "no", "maybe"};
  const json chat = test::post(c, "/v1/chat/completions",
                               {{"messages", {{{"role", "user"}, {"content", "Is the sky blue?"}}}},
                                {"max_tokens", 10},
                                {"guided_choice", choices}});
  const std::string said = chat["choices"][0]["message"]["content"].get<std::string>();
  EXPECT_NE(std::find(choices.begin(), choices.end(), said), choices.end()) << chat.dump();
  const auto chunks = test::sse_chunks(test::post_raw(c, "/v1/completions",
                                                      {{"prompt", "Lily"},
                                                       {"max_tokens", 40},
                                                       {"stream", true},
                                                       {"seed", 2},
                                                       {"structured_outputs", {{"grammar", sentence}}}}));
  std::string streamed;
  for (const json& ch : chunks)
    if (ch.contains("choices") && !ch["choices"].empty()) streamed += ch["choices"][0].value("text", "");
  GbnfMatcher ms(*g);
  EXPECT_TRUE(ms.feed(streamed) && ms.complete()) << streamed;
  // vLLM's regex: the whole answer matches it.
  const std::regex date("[0-9]{4}-[0-9]{2}-[0-9]{2}");
  for (int seed = 1; seed <= 3; ++seed) {
    const json r = test::post(c, "/v1/completions",
                              {{"prompt", "The day was"},
                               {"max_tokens", 20},
                               {"temperature", 1.0},
                               {"seed", seed},
                               {"guided_regex", "\\d{4}-\\d{2}-\\d{2}"}});
    const std::string text = r["choices"][0]["text"].get<std::string>();
    EXPECT_TRUE(std::regex_match(text, date)) << r.dump();
    EXPECT_EQ(r["choices"][0]["finish_reason"], "stop") << r.dump();
  }
  // A grammar that does not parse is the client's error, with its place.
  int status = 0;
  const json bad = test::post(c, "/v1/completions", {{"prompt", "x"}, {"grammar", "root ::= \"a\" b\n"}}, &status);
  EXPECT_EQ(status, 400);
  EXPECT_NE(bad["error"]["message"].get<std::string>().find("rule 'b' is used but not defined (line 1, column 14)"),
            std::string::npos)
      << bad.dump();
}

// llama.cpp's token references: <[id]> by id, <s> by its text (a control
// token: no bytes, so only a reference reads it), resolved in the model's
// vocabulary; what they cannot name is a 400.
TEST(OpenAiFields, GrammarTokenReferencesNameTheModelsTokens) {
  auto model = test::stories_gguf();
  test::TestServer srv(model, test::default_sched());
  auto c = srv.client();
  const Tokenizer tok(model->vocab);
  const std::string prompt = "Once upon a time";
  std::vector<int32_t> ids = tok.encode(prompt, model->vocab.add_bos);
  const std::vector<int32_t> forced = tok.encode(" the purple frog", false);
  ASSERT_GE(forced.size(), 3u);
  std::string grammar = "root ::=";
  for (const int32_t id : forced) grammar += " <[" + std::to_string(id) + "]>";
  grammar += " <s> \".\"\n";
  for (int seed = 1; seed <= 2; ++seed) {
    int status = 0;
    const json r = test::post(
        c, "/v1/completions",
        {{"prompt", prompt}, {"max_tokens", 20}, {"temperature", 1.0}, {"seed", seed}, {"grammar", grammar}}, &status);
    ASSERT_EQ(status, 200) << r.dump();
    ids.insert(ids.end(), forced.begin(), forced.end());
    EXPECT_EQ(prompt + r["choices"][0]["text"].get<std::string>(), tok.decode(ids) + ".") << r.dump();
    ids.resize(ids.size() - forced.size());
    EXPECT_EQ(r["choices"][0]["finish_reason"], "stop");
    EXPECT_GE(r["usage"]["completion_tokens"].get<int>(), static_cast<int>(forced.size()) + 2)
        << "the references' tokens, <s>, then '.'";
  }
  for (const auto& [bad, want] : std::vector<std::pair<std::string, std::string>>{
           {"root ::= <[100000]>\n", "past the vocabulary (512 tokens)"},
           {"root ::= \"a\" <purple frog>\n", "'<purple frog>' is not one token"},
           {"root ::= \"a\" </s>\n", "ends generation"}}) {
    int status = 0;
    const json r = test::post(c, "/v1/completions", {{"prompt", "x"}, {"grammar", bad}}, &status);
    EXPECT_EQ(status, 400) << bad;
    EXPECT_NE(r["error"]["message"].get<std::string>().find(want), std::string::npos) << r.dump();
  }
  // A regex has no token references: '<' and '>' are characters there.
  const json re = test::post(c, "/v1/completions", {{"prompt", "x"}, {"max_tokens", 8}, {"guided_regex", "<[ab]>"}});
  const std::string text = re["choices"][0]["text"].get<std::string>();
  EXPECT_TRUE(text == "<a>" || text == "<b>") << re.dump();
}

TEST(OpenAiFields, CompletionTextContinuesItsPromptAsTheTokenizerDecodesIt) {
  auto model = test::stories_gguf();
  test::TestServer srv(model, test::default_sched());
  auto c = srv.client();
  Tokenizer tok(model->vocab);
  EngineOptions eo;
  eo.kv_blocks = 64;
  Engine e(model, eo);
  int leading_space = 0;
  for (const std::string prompt : {"Once upon a", "Once upon a time, there was", "Lily", "The cat sat", ""}) {
    const std::string text = greedy_text(c, {{"prompt", prompt}}, 8);
    std::vector<int32_t> ids = tok.encode(prompt, model->vocab.add_bos);
    const std::vector<int32_t> answer = test::greedy(e, KvPolicy::dense(), ids, 8);
    ids.insert(ids.end(), answer.begin(), answer.end());
    EXPECT_EQ(prompt + text, tok.decode(ids)) << "prompt '" << prompt << "'";
    leading_space += !text.empty() && text[0] == ' ';
  }
  EXPECT_GE(leading_space, 2);  // the case that broke is among them
}

TEST(OpenAiFields, LogitBiasAndPenaltiesSteerTheServersSampler) {
  auto model = test::stories_gguf();
  test::TestServer srv(model, test::default_sched());
  auto c = srv.client();
  Tokenizer tok(model->vocab);
  const std::string plain = greedy_text(c, {}, 30);
  auto id_of = [&](const std::string& text) {
    for (int32_t id = 0; id < model->vocab.size(); ++id)  // the piece, not a byte token
      if (model->vocab.types[static_cast<size_t>(id)] != TokenType::Byte && tok.token_bytes(id) == text) return id;
    return -1;
  };
  // Ban the first greedy token: the answer starts otherwise.
  const int32_t comma = id_of(",");
  ASSERT_EQ(plain.rfind(",", 0), 0u);
  ASSERT_GE(comma, 0);
  const std::string banned = greedy_text(c, {{"logit_bias", {{std::to_string(comma), -100}}}}, 30);
  EXPECT_NE(banned.rfind(",", 0), 0u) << banned;
  // Force a token: every step picks it.
  const int32_t forced = id_of(" the");
  ASSERT_GE(forced, 0);
  const std::string forced_text = greedy_text(c, {{"logit_bias", {{std::to_string(forced), 100}}}}, 5);
  std::string want;
  for (int i = 0; i < 5; ++i) want += tok.token_bytes(forced);  // a completion keeps its first space
  EXPECT_EQ(forced_text, want);
  // Penalties reach the sampler: they change the greedy text.
  const std::string penalized =
      greedy_text(c, {{"presence_penalty", 2}, {"frequency_penalty", 2}, {"repeat_last_n", 256}}, 30);
  EXPECT_NE(penalized, plain);
  // An id past the vocabulary is refused before anything runs.
  int status = 0;
  const json r = test::post(c, "/v1/completions", {{"prompt", "a"}, {"logit_bias", {{"512", 1}}}}, &status);
  EXPECT_EQ(status, 400);
  EXPECT_EQ(r["error"]["param"], "logit_bias");
}

}  // namespace
}  // namespace ss
