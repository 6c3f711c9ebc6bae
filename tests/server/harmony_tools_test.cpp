// gpt-oss's own tool calls (harmony_tools.h): the tools as gpt-oss's
// template writes them, the shape of a call (masks equal feeds over a
// vocabulary of Harmony tokens, the exit the header names), the reply, the
// history, and the server end to end.
#include "server/harmony_tools.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "runtime_helpers.h"
#include "server/request_parse.h"
#include "server_fixture.h"
#include "util/utf8.h"

namespace ss {
namespace {

using nlohmann::json;

// The request's tools, read as the server reads them (parse_tools).
json weather_tools_json() {
  return json::parse(R"([{"type":"function","function":{"name":"get_weather","description":"Weather now",
    "parameters":{"type":"object","properties":{
      "city":{"type":"string","description":"A city","maxLength":10},
      "unit":{"type":"string","enum":["c","f"],"default":"c"},
      "days":{"type":"array","items":{"type":"integer"}},
      "where":{"type":"object","properties":{"lat":{"type":"number"}},"required":["lat"]}},
      "required":["city"]}}},
    {"type":"function","function":{"name":"ping","description":"","parameters":{"type":"object","properties":{}}}}])");
}

ToolSetup weather_tools(bool required) {
  ToolSetup t;
  const json body = {{"tools", weather_tools_json()}, {"tool_choice", required ? "required" : "auto"}};
  EXPECT_EQ(parse_tools(body, t), "");
  return t;
}

TEST(HarmonyTools, NamespaceAsGptOssTemplateWritesIt) {
  // Properties come in key order (nlohmann::json sorts object keys).
  EXPECT_EQ(harmony_tools_namespace(weather_tools(false)),
            "## functions\n\nnamespace functions {\n\n"
            "// Weather now\ntype get_weather = (_: {\n"
            "// A city\ncity: string,\n"
            "days?: number[],\n"
            "unit?: \"c\" | \"f\", // default: c,\n"
            "where?: {\nlat: \n                number},\n"
            "}) => any;\n\n"
            "// \ntype ping = () => any;\n\n"
            "} // namespace functions");
  EXPECT_EQ(harmony_typescript_type(json::parse(R"({"type":["string","null"]})")), "string | null");
  EXPECT_EQ(harmony_typescript_type(json::parse(R"({"type":"string","nullable":true})")), "string | null");
  EXPECT_EQ(harmony_typescript_type(json::parse(R"({"oneOf":[{"type":"object"},{"type":"string"}]})")), "any");
  EXPECT_EQ(harmony_typescript_type(json::parse(R"({"oneOf":[{"type":"number"},{"type":"string"}]})")),
            "number | string");
  EXPECT_EQ(harmony_typescript_type(json::parse(R"({"type":"array"})")), "any[]");
  EXPECT_EQ(harmony_typescript_type(json::parse(R"({"anyOf":[{"type":"number"}]})")), "any");
}

// A request with tools, a call and its result, rendered as gpt-oss's own
// template renders it: the text below is what TRL's copy of that template
// (trl/chat_templates/gptoss.jinja) gives under Python's jinja2 with
// transformers' tojson, for the same messages (properties in key order).
TEST(HarmonyTools, HistoryAndToolsAsTheTemplateWritesThem) {
  const json body = json::parse(R"({"messages": [
      {"role": "system", "content": "Be brief."},
      {"role": "user", "content": "Weather?"},
      {"role": "assistant", "content": "Need the weather.", "tool_calls": [{"id": "call_1", "type": "function",
        "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]},
      {"role": "tool", "tool_call_id": "call_1", "content": "sunny \"20C\""}]})");
  json with_tools = body;
  with_tools["tools"] = weather_tools_json();
  CompletionRequest cr;
  RequestError err;
  ASSERT_TRUE(parse_completion_body(with_tools.dump(), true, 0, cr, err)) << err.message;
  const std::string text =
      render_chat_turn(ChatFamily::GptOss, cr.messages, true, "2026-12-07", {}, harmony_tools_namespace(cr.tools));
  EXPECT_EQ(text,
            "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\n"
            "Knowledge cutoff: 2024-06\n"
            "Current date: 2026-12-07\n"
            "\n"
            "Reasoning: medium\n"
            "\n"
            "# Valid channels: analysis, commentary, final. Channel must be included for every message.\n"
            "Calls to these tools must go to the commentary channel: 'functions'.<|end|><|start|>developer<|message|># "
            "Instructions\n"
            "\n"
            "Be brief.\n"
            "\n"
            "# Tools\n"
            "\n"
            "## functions\n"
            "\n"
            "namespace functions {\n"
            "\n"
            "// Weather now\n"
            "type get_weather = (_: {\n"
            "// A city\n"
            "city: string,\n"
            "days?: number[],\n"
            "unit?: \"c\" | \"f\", // default: c,\n"
            "where?: {\n"
            "lat: \n"
            "                number},\n"
            "}) => any;\n"
            "\n"
            "// \n"
            "type ping = () => any;\n"
            "\n"
            "} // namespace "
            "functions<|end|><|start|>user<|message|>Weather?<|end|><|start|>assistant<|channel|>analysis<|message|>"
            "Need the weather.<|end|><|start|>assistant to=functions.get_weather<|channel|>commentary "
            "json<|message|>{\"city\": \"Paris\"}<|call|><|start|>functions.get_weather "
            "to=assistant<|channel|>commentary<|message|>\"sunny \\\"20C\\\"\"<|end|><|start|>assistant");
  // A later answer in the final channel drops the reasoning before the call.
  std::vector<ChatMessage> msgs = cr.messages;
  msgs.push_back({"assistant", "It is sunny."});
  msgs.push_back({"user", "Thanks"});
  const std::string later = render_chat_turn(ChatFamily::GptOss, msgs, true, "2026-12-07", {}, "");
  EXPECT_EQ(later.find("Need the weather."), std::string::npos);
  EXPECT_NE(later.find("<|start|>assistant<|channel|>final<|message|>It is sunny.<|end|>"), std::string::npos);
}

TEST(HarmonyTools, RepliesTurnTheCallIntoToolCalls) {
  std::string finish = "stop";
  const json call = harmony_tool_reply_fields(
      "<|channel|>analysis<|message|>Look it up.<|end|><|start|>assistant<|channel|>commentary "
      "to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"Paris\"}",
      finish, false);
  EXPECT_EQ(finish, "tool_calls");
  EXPECT_TRUE(call["content"].is_null());
  EXPECT_EQ(call["reasoning_content"], "Look it up.");
  ASSERT_EQ(call["tool_calls"].size(), 1u);
  EXPECT_EQ(call["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(json::parse(call["tool_calls"][0]["function"]["arguments"].get<std::string>()), json({{"city", "Paris"}}));
  finish = "stop";
  const json role_form =
      harmony_tool_reply_fields(" to=functions.ping<|channel|>commentary json<|message|>{}", finish, true);
  EXPECT_EQ(role_form["tool_calls"][0]["function"]["name"], "ping");
  EXPECT_EQ(role_form["tool_calls"][0]["index"], 0);
  finish = "stop";
  const json answer = harmony_tool_reply_fields("<|channel|>final<|message|>It is sunny.", finish, false);
  EXPECT_EQ(answer, json({{"content", "It is sunny."}}));
  EXPECT_EQ(finish, "stop");
  finish = "length";
  const json cut = harmony_tool_reply_fields("<|channel|>commentary to=functions.ping<|message|>{\"a", finish, false);
  EXPECT_FALSE(cut.contains("tool_calls"));
  EXPECT_EQ(finish, "length");
}

// Walks of a Constraint from the plan over Harmony tokens and text: every
// mask equals feeding each token alone, and the header picks the schema.
TEST(HarmonyTools, CallsAreShapedAndTheHeaderPicksTheArguments) {
  const std::vector<std::string> bytes = {"",
                                          "<|channel|>",
                                          "analysis",
                                          "<|message|>",
                                          "<|end|>",
                                          "<|start|>",
                                          "assistant",
                                          "final",
                                          "commentary",
                                          " to=functions.",
                                          "get_weather",
                                          "ping",
                                          " <|constrain|>",
                                          "json",
                                          " json",
                                          "{",
                                          "}",
                                          "\"city\"",
                                          ":",
                                          "\"Oslo\"",
                                          "x",
                                          "to=functions."};
  const ConstraintVocab vocab(bytes, {0});
  for (const bool required : {true, false}) {
    auto plan = harmony_tool_plan(weather_tools(required));
    ASSERT_TRUE(plan.ok()) << plan.error().message;
    std::mt19937 rng(required ? 5 : 6);
    int calls = 0, answers = 0;
    for (int walk = 0; walk < 40; ++walk) {
      Constraint c(*plan);
      std::vector<int32_t> fed;
      std::string text;
      for (int step = 0; step < 30 && !c.complete(); ++step) {
        std::vector<float> logits(bytes.size(), 0.0f);
        c.mask(vocab, logits, true);
        std::vector<int32_t> ok;
        for (size_t t = 1; t < bytes.size(); ++t) {
          Constraint fresh(*plan);
          bool replay = true;
          for (const int32_t f : fed) replay = replay && fresh.feed_token(f, bytes[static_cast<size_t>(f)]);
          const bool want = replay && fresh.feed_token(static_cast<int32_t>(t), bytes[t]);
          EXPECT_EQ(!std::isinf(logits[t]), want) << "'" << bytes[t] << "' after '" << text << "'";
          if (want) ok.push_back(static_cast<int32_t>(t));
        }
        EXPECT_EQ(!std::isinf(logits[0]), c.can_end()) << text;
        if (ok.empty()) break;
        int32_t pick = ok[std::uniform_int_distribution<size_t>(0, ok.size() - 1)(rng)];
        for (const int32_t t : ok)  // toward a finished call: the object's pieces first
          if ((bytes[static_cast<size_t>(t)] == "}" || bytes[static_cast<size_t>(t)] == "<|message|>") && rng() % 2)
            pick = t;
        ASSERT_TRUE(c.feed_token(pick, bytes[static_cast<size_t>(pick)]));
        fed.push_back(pick);
        text += bytes[static_cast<size_t>(pick)];
      }
      std::string finish = "stop";
      const json reply = harmony_tool_reply_fields(text, finish, false);
      if (c.complete()) {  // a call whose arguments closed
        ++calls;
        ASSERT_TRUE(reply.contains("tool_calls")) << text;
        const std::string name = reply["tool_calls"][0]["function"]["name"];
        const json args = json::parse(reply["tool_calls"][0]["function"]["arguments"].get<std::string>());
        if (name == "get_weather") {  // city is required; no other key fits this vocabulary
          EXPECT_EQ(args.size(), 1u) << text;
          EXPECT_TRUE(args["city"].is_string()) << text;
        } else {
          EXPECT_EQ(name, "ping") << text;
          EXPECT_EQ(args, json::object()) << text;
        }
      }
      if (text.find("<|channel|>final<|message|>") != std::string::npos) {
        EXPECT_FALSE(required) << text;  // "required": no plain answer
        EXPECT_TRUE(c.can_end());
        ++answers;
      }
    }
    std::printf("required=%d: %d of 40 walks called a tool, %d answered\n", required, calls, answers);
    EXPECT_GT(calls, 5);
    if (!required) {
      EXPECT_GT(answers, 0);
    }
  }
}

TEST(HarmonyTools, TheServerCallsToolsInGptOssFormat) {
  auto model = test::stories_gguf();
  ServerOptions harmony;
  harmony.chat = ChatFamily::GptOss;
  test::TestServer oss(model, test::default_sched(), harmony);
  auto c = oss.client();
  const json tools = {{{"type", "function"},
                       {"function",
                        {{"name", "get_weather"},
                         {"description", "Weather now"},
                         {"parameters",
                          {{"type", "object"},
                           {"properties", {{"city", {{"type", "string"}, {"maxLength", 10}}}}},
                           {"required", {"city"}}}}}}}};
  int calls = 0;
  for (int seed = 1; seed <= 4; ++seed) {
    int status = 0;
    const json r = test::post(c, "/v1/chat/completions",
                              {{"messages", {{{"role", "user"}, {"content", "What is the weather in Paris?"}}}},
                               {"max_tokens", 400},
                               {"seed", seed},
                               {"tools", tools},
                               {"tool_choice", "required"}},
                              &status);
    ASSERT_EQ(status, 200) << r.dump();
    const json& ch = r["choices"][0];
    if (ch["finish_reason"] != "tool_calls") {
      EXPECT_EQ(ch["finish_reason"], "length") << r.dump();  // still reasoning at max_tokens
      continue;
    }
    ++calls;
    ASSERT_EQ(ch["message"]["tool_calls"].size(), 1u) << r.dump();
    EXPECT_EQ(ch["message"]["tool_calls"][0]["function"]["name"], "get_weather");
    const json args = json::parse(ch["message"]["tool_calls"][0]["function"]["arguments"].get<std::string>());
    ASSERT_TRUE(args["city"].is_string()) << args.dump();
    EXPECT_LE(utf8_chars(args["city"].get<std::string>()).size(), 10u);
    EXPECT_EQ(args.size(), 1u);
  }
  std::printf("gpt-oss tool calls: %d of 4\n", calls);
  EXPECT_GE(calls, 2);
  // The call and its result go back as Harmony messages; the next answer
  // goes on from them.
  int status = 0;
  const json next =
      test::post(c, "/v1/chat/completions",
                 {{"messages",
                   {{{"role", "user"}, {"content", "What is the weather in Paris?"}},
                    {{"role", "assistant"},
                     {"content", nullptr},
                     {"tool_calls",
                      {{{"id", "call_1"},
                        {"type", "function"},
                        {"function", {{"name", "get_weather"}, {"arguments", "{\"city\":\"Paris\"}"}}}}}}},
                    {{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "sunny"}}}},
                  {"max_tokens", 40},
                  {"tools", tools}},
                 &status);
  EXPECT_EQ(status, 200) << next.dump();
  // An unknown tool_choice name and a tool with a bad schema are the client's errors.
  const json bad = test::post(c, "/v1/chat/completions",
                              {{"messages", {{{"role", "user"}, {"content", "hi"}}}},
                               {"tools", tools},
                               {"tool_choice", {{"type", "function"}, {"function", {{"name", "nope"}}}}}},
                              &status);
  EXPECT_EQ(status, 400) << bad.dump();
}

}  // namespace
}  // namespace ss
