// /tokenize, /detokenize and /tokenizer_info in vLLM's and llama.cpp's
// shapes, against the engine's own Tokenizer (the oracle), and their limits.
#include <gtest/gtest.h>

#include "runtime_helpers.h"
#include "server_fixture.h"

namespace ss {
namespace {

using nlohmann::json;

std::vector<int32_t> ids_of(const json& r) {
  std::vector<int32_t> out;
  for (const json& t : r["tokens"]) out.push_back(t.get<int32_t>());
  return out;
}

TEST(TokenizeApi, VllmAndLlamaCppShapesMatchTheTokenizer) {
  auto model = test::stories_gguf();
  test::TestServer srv(model, test::default_sched());
  auto c = srv.client();
  Tokenizer tok(model->vocab);
  for (const std::string text :
       {"Once upon a time", "", "  two  spaces", "Lily said: \"hi!\"</s> The end.", "caf\xc3\xa9"}) {
    int status = 0;
    // vLLM: special tokens added unless told not to; their texts parsed.
    const json v = test::post(c, "/tokenize", {{"prompt", text}}, &status);
    ASSERT_EQ(status, 200) << v.dump();
    EXPECT_EQ(ids_of(v), tok.encode(text, true, true)) << text;
    EXPECT_EQ(v["count"], v["tokens"].size());
    EXPECT_EQ(v["max_model_len"], model->config.trained_context);
    const json v2 = test::post(c, "/tokenize", {{"prompt", text}, {"add_special_tokens", false}});
    EXPECT_EQ(ids_of(v2), tok.encode(text, false, true)) << text;
    // llama.cpp: no special tokens unless asked; parse_special off keeps "</s>" as text.
    const json l = test::post(c, "/tokenize", {{"content", text}, {"parse_special", false}});
    EXPECT_EQ(ids_of(l), tok.encode(text, false, false)) << text;
    const json l2 = test::post(c, "/tokenize", {{"content", text}, {"add_special", true}});
    EXPECT_EQ(ids_of(l2), tok.encode(text, true, true)) << text;
    // /detokenize inverts (vLLM's "prompt", llama.cpp's "content").
    const json d = test::post(c, "/detokenize", {{"tokens", v["tokens"]}}, &status);
    ASSERT_EQ(status, 200);
    EXPECT_EQ(d["prompt"], tok.decode(ids_of(v)));
    EXPECT_EQ(d["content"], d["prompt"]);
  }
  const json p = test::post(c, "/tokenize", {{"content", "Once upon"}, {"with_pieces", true}});
  ASSERT_GE(p["tokens"].size(), 2u);
  std::string joined;
  for (const json& t : p["tokens"]) joined += t["piece"].get<std::string>();
  EXPECT_EQ(joined, " Once upon");
}

TEST(TokenizeApi, InfoNamesTheSpecialTokensAsLmEvalReadsThem) {
  auto model = test::stories_gguf();
  test::TestServer srv(model, test::default_sched());
  auto c = srv.client();
  auto r = c.Get("/tokenizer_info");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200);
  const json info = json::parse(r->body);
  EXPECT_EQ(info["eos_token"], "</s>");
  EXPECT_EQ(info["bos_token"], "<s>");
  EXPECT_EQ(info["vocab_size"], 512);
  // lm-eval's RemoteTokenizer: eos_token_id = tokenize(eos_token, add_special_tokens=False)[0].
  const json eos = test::post(c, "/tokenize", {{"prompt", info["eos_token"]}, {"add_special_tokens", false}});
  ASSERT_EQ(eos["tokens"].size(), 1u);
  EXPECT_EQ(eos["tokens"][0], model->vocab.eos);
}

TEST(TokenizeApi, BadBodiesAre400sAndTheApiKeyCoversThem) {
  auto model = test::stories_gguf();
  ServerOptions ho;
  ho.api_key = "k";
  test::TestServer srv(model, test::default_sched(), ho);
  auto c = srv.client();
  auto unauth = c.Post("/tokenize", R"({"prompt":"a"})", "application/json");
  ASSERT_TRUE(unauth);
  EXPECT_EQ(unauth->status, 401);
  EXPECT_EQ(c.Get("/tokenizer_info")->status, 401);
  c.set_bearer_token_auth("k");
  const json bad[][2] = {
      {"/tokenize", json::array()},
      {"/tokenize", {{"prompt", 5}}},
      {"/tokenize", {{"text", "a"}}},
      {"/tokenize", {{"prompt", "a"}, {"add_special_tokens", "yes"}}},
      {"/tokenize", {{"content", "a"}, {"with_pieces", 1}}},
      {"/detokenize", {{"tokens", "1 2"}}},
      {"/detokenize", {{"tokens", {1, 512}}}},
      {"/detokenize", {{"tokens", {1, -1}}}},
      {"/detokenize", {{"tokens", {1, 2.5}}}},
      {"/detokenize", json::object()},
  };
  for (const auto& b : bad) {
    int status = 0;
    const json r = test::post(c, b[0].get<std::string>(), b[1], &status);
    EXPECT_EQ(status, 400) << b[1].dump();
    EXPECT_TRUE(r.contains("error")) << r.dump();
  }
  auto raw = c.Post("/tokenize", "{not json", "application/json");
  ASSERT_TRUE(raw);
  EXPECT_EQ(raw->status, 400);
  EXPECT_EQ(c.Get("/tokenize")->status, 405);
  int status = 0;
  test::post(c, "/tokenize", {{"prompt", "still serving"}}, &status);
  EXPECT_EQ(status, 200);
}

}  // namespace
}  // namespace ss
