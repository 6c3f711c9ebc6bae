// Tool calls (server/tool_calls.h): parsing, the answer's schema, history
// messages, the reply's shape, and the server answering with tool_calls
// whose arguments follow each tool's parameters.
#include "server/tool_calls.h"

#include <gtest/gtest.h>

#include "runtime_helpers.h"
#include "sample/json_grammar.h"
#include "server/request_parse.h"
#include "server_fixture.h"

namespace ss {
namespace {

using nlohmann::json;

const json kWeather = {{"type", "function"},
                       {"function",
                        {{"name", "get_weather"},
                         {"description", "Weather for a city"},
                         {"parameters",
                          {{"type", "object"},
                           {"properties", {{"city", {{"type", "string"}, {"maxLength", 12}}}}},
                           {"required", {"city"}}}}}}};
const json kAdd = {{"type", "function"},
                   {"function",
                    {{"name", "add"},
                     {"parameters",
                      {{"type", "object"},
                       {"properties", {{"a", {{"type", "integer"}}}, {"b", {{"$ref", "#/$defs/n"}}}}},
                       {"required", {"a", "b"}},
                       {"$defs", {{"n", {{"type", "integer"}}}}}}}}}};

bool schema_takes(const ToolSetup& t, const std::string& text) {
  auto s = tools_schema(t);
  EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().message);
  JsonGrammar g(s.value());
  return g.feed(text) && g.complete();
}

TEST(ToolCalls, ToolsAndToolChoiceAreParsedOrRefused) {
  ToolSetup t;
  ASSERT_EQ(parse_tools({{"tools", {kWeather, kAdd}}}, t), "");
  EXPECT_TRUE(t.active());
  EXPECT_FALSE(t.required);
  ASSERT_EQ(parse_tools({{"tools", {kWeather, kAdd}}, {"tool_choice", "none"}}, t), "");
  EXPECT_FALSE(t.active());
  ASSERT_EQ(parse_tools({{"tools", {kWeather, kAdd}}, {"tool_choice", "required"}}, t), "");
  EXPECT_TRUE(t.required);
  ASSERT_EQ(
      parse_tools(
          {{"tools", {kWeather, kAdd}}, {"tool_choice", {{"type", "function"}, {"function", {{"name", "add"}}}}}}, t),
      "");
  EXPECT_EQ(t.forced, "add");
  json bad_params = kWeather;
  bad_params["function"]["parameters"]["properties"]["city"]["multipleOf"] = 2;
  json bad_name = kAdd;
  bad_name["function"]["name"] = "add two";
  for (const json& b : {json{{"tools", "x"}}, json{{"tools", {kAdd, kAdd}}}, json{{"tools", {bad_params}}},
                        json{{"tools", {bad_name}}}, json{{"tools", {{{"type", "code"}}}}},
                        json{{"tools", {kAdd}}, {"tool_choice", {{"type", "function"}, {"function", {{"name", "x"}}}}}},
                        json{{"tool_choice", "required"}}, json{{"tools", {kAdd}}, {"tool_choice", "sometimes"}},
                        json{{"tools", {kAdd}}, {"parallel_tool_calls", "yes"}}}) {
    ToolSetup u;
    EXPECT_NE(parse_tools(b, u), "") << b.dump();
  }
  EXPECT_NE(parse_tools({{"tools", {bad_params}}}, t).find("tool 'get_weather' parameters: JSON schema at "),
            std::string::npos);
}

// The tools of one request share one budget for their pattern automata: a
// dozen tools that are each fine alone do not buy a dozen times the work.
TEST(ToolCalls, PatternsOfAllToolsShareOneBudget) {
  json tools = json::array();
  for (int i = 0; i < 12; ++i) {
    json t = kWeather;
    t["function"]["name"] = "t" + std::to_string(i);
    t["function"]["parameters"]["properties"]["city"] = {{"type", "string"}, {"pattern", "[ab]*a[ab]{11}"}};
    tools.push_back(t);
  }
  ASSERT_TRUE(JsonSchema::compile(tools[0]["function"]["parameters"]).ok());  // 4096 states x 6 classes alone
  ToolSetup few, many;
  EXPECT_EQ(parse_tools({{"tools", json(tools.begin(), tools.begin() + 2)}}, few), "");
  const std::string e = parse_tools({{"tools", tools}}, many);
  EXPECT_NE(e.find("parameters: JSON schema at /properties/city: 'pattern': the pattern "), std::string::npos) << e;
}

TEST(ToolCalls, TheAnswerIsACallOfAToolOrAReplyWhereAllowed) {
  ToolSetup t;
  ASSERT_EQ(parse_tools({{"tools", {kWeather, kAdd}}}, t), "");
  EXPECT_TRUE(schema_takes(t, R"({"tool_call":{"name":"add","arguments":{"a":1,"b":2}}})"));
  EXPECT_TRUE(schema_takes(t, R"({"tool_call":{"name":"get_weather","arguments":{"city":"Paris"}}})"));
  EXPECT_TRUE(schema_takes(t, R"({"response":"It is sunny."})"));
  EXPECT_FALSE(schema_takes(t, R"({"tool_call":{"name":"add","arguments":{"a":1,"b":"2"}}})"));  // b: $ref'd integer
  EXPECT_FALSE(schema_takes(t, R"({"tool_call":{"name":"add","arguments":{"city":"Paris"}}})"));
  EXPECT_FALSE(schema_takes(t, R"({"tool_call":{"name":"sub","arguments":{}}})"));
  EXPECT_FALSE(schema_takes(t, R"({"tool_call":{"name":"get_weather","arguments":{"city":"Paris, France, Europe"}}})"));
  ToolSetup req;
  ASSERT_EQ(parse_tools({{"tools", {kWeather, kAdd}}, {"tool_choice", "required"}}, req), "");
  EXPECT_FALSE(schema_takes(req, R"({"response":"hi"})"));
  EXPECT_TRUE(schema_takes(req, R"({"tool_call":{"name":"add","arguments":{"a":1,"b":2}}})"));
  ToolSetup forced;
  ASSERT_EQ(parse_tools(
                {{"tools", {kWeather, kAdd}}, {"tool_choice", {{"type", "function"}, {"function", {{"name", "add"}}}}}},
                forced),
            "");
  EXPECT_FALSE(schema_takes(forced, R"({"tool_call":{"name":"get_weather","arguments":{"city":"Paris"}}})"));
  EXPECT_TRUE(schema_takes(forced, R"({"tool_call":{"name":"add","arguments":{"a":1,"b":2}}})"));
  const std::string text = tools_system_text(forced);
  EXPECT_EQ(text.find("get_weather"), std::string::npos);
  EXPECT_NE(text.find("- add\n  arguments: "), std::string::npos) << text;
}

// parallel_tool_calls true: {"tool_calls": [...]}, one to kMaxParallelCalls calls.
TEST(ToolCalls, ParallelCallsAreAnArrayOfCalls) {
  ToolSetup t;
  ASSERT_EQ(parse_tools({{"tools", {kWeather, kAdd}}, {"parallel_tool_calls", true}}, t), "");
  EXPECT_TRUE(t.parallel);
  EXPECT_TRUE(schema_takes(
      t,
      R"({"tool_calls":[{"name":"add","arguments":{"a":1,"b":2}},{"name":"get_weather","arguments":{"city":"Rome"}}]})"));
  EXPECT_TRUE(schema_takes(t, R"({"tool_calls":[{"name":"add","arguments":{"a":1,"b":2}}]})"));
  EXPECT_TRUE(schema_takes(t, R"({"response":"It is sunny."})"));
  EXPECT_FALSE(schema_takes(t, R"({"tool_calls":[]})"));
  EXPECT_FALSE(schema_takes(t, R"({"tool_call":{"name":"add","arguments":{"a":1,"b":2}}})"));
  EXPECT_FALSE(schema_takes(t, R"({"tool_calls":[{"name":"add","arguments":{"a":1}}]})"));
  std::string many = R"({"tool_calls":[)";
  for (int i = 0; i <= kMaxParallelCalls; ++i)
    many += std::string(i ? "," : "") + R"({"name":"add","arguments":{"a":1,"b":2}})";
  EXPECT_FALSE(schema_takes(t, many + "]}"));
  EXPECT_NE(tools_system_text(t).find("{\"tool_calls\": [{\"name\""), std::string::npos) << tools_system_text(t);
  ToolSetup one;
  ASSERT_EQ(parse_tools({{"tools", {kAdd}}, {"parallel_tool_calls", false}}, one), "");
  EXPECT_FALSE(one.parallel);

  std::string finish = "stop";
  const json two = tool_reply_fields(
      R"({"tool_calls":[{"name":"add","arguments":{"a":1,"b":2}},{"name":"get_weather","arguments":{"city":"Rome"}}]})",
      finish, true);
  EXPECT_EQ(finish, "tool_calls");
  ASSERT_EQ(two["tool_calls"].size(), 2u);
  EXPECT_EQ(two["tool_calls"][0]["index"], 0);
  EXPECT_EQ(two["tool_calls"][1]["index"], 1);
  EXPECT_EQ(two["tool_calls"][1]["function"]["name"], "get_weather");
  EXPECT_NE(two["tool_calls"][0]["id"], two["tool_calls"][1]["id"]);

  const json history = {
      {"role", "assistant"},
      {"content", nullptr},
      {"tool_calls",
       {{{"id", "call_1"}, {"type", "function"}, {"function", {{"name", "add"}, {"arguments", "{\"a\":1}"}}}},
        {{"id", "call_2"}, {"type", "function"}, {"function", {{"name", "add"}, {"arguments", "{\"a\":2}"}}}}}}};
  std::unordered_map<std::string, std::string> names;
  ChatMessage a{"assistant", ""};
  ASSERT_EQ(tool_history_message(history, a, true, names), "");
  EXPECT_EQ(json::parse(a.content),
            json::parse(R"({"tool_calls":[{"name":"add","arguments":{"a":1}},{"name":"add","arguments":{"a":2}}]})"));
  ChatMessage b{"assistant", ""};
  ASSERT_EQ(tool_history_message(history, b, false, names), "");
  EXPECT_EQ(b.content, R"({"tool_call":{"arguments":{"a":1},"name":"add"}})"
                       "\n"
                       R"({"tool_call":{"arguments":{"a":2},"name":"add"}})");
}

TEST(ToolCalls, RepliesAndHistoryAreOpenAisShapes) {
  std::string finish = "stop";
  const json call = tool_reply_fields(R"({"tool_call":{"name":"add","arguments":{"a":1,"b":2}}})", finish, false);
  EXPECT_EQ(finish, "tool_calls");
  EXPECT_TRUE(call["content"].is_null());
  ASSERT_EQ(call["tool_calls"].size(), 1u);
  EXPECT_EQ(call["tool_calls"][0]["type"], "function");
  EXPECT_EQ(call["tool_calls"][0]["function"]["name"], "add");
  EXPECT_EQ(json::parse(call["tool_calls"][0]["function"]["arguments"].get<std::string>()), json({{"a", 1}, {"b", 2}}));
  EXPECT_EQ(call["tool_calls"][0]["id"].get<std::string>().rfind("call_", 0), 0u);
  EXPECT_FALSE(call["tool_calls"][0].contains("index"));
  finish = "stop";
  EXPECT_EQ(tool_reply_fields(R"({"tool_call":{"name":"add","arguments":{}}})", finish, true)["tool_calls"][0]["index"],
            0);
  finish = "stop";
  EXPECT_EQ(tool_reply_fields(R"({"response":"It is sunny."})", finish, false), json({{"content", "It is sunny."}}));
  EXPECT_EQ(finish, "stop");
  finish = "length";
  EXPECT_EQ(tool_reply_fields(R"({"tool_call":{"na)", finish, false), json({{"content", R"({"tool_call":{"na)"}}));
  EXPECT_EQ(finish, "length");

  std::unordered_map<std::string, std::string> names;
  ChatMessage a{"assistant", ""};
  ASSERT_EQ(
      tool_history_message(
          {{"role", "assistant"},
           {"content", nullptr},
           {"tool_calls",
            {{{"id", "call_1"}, {"type", "function"}, {"function", {{"name", "add"}, {"arguments", "{\"a\":1}"}}}}}}},
          a, false, names),
      "");
  EXPECT_EQ(a.role, "assistant");
  EXPECT_EQ(a.content, R"({"tool_call":{"arguments":{"a":1},"name":"add"}})");
  // The tool fields, for formats with their own syntax (gpt-oss).
  ASSERT_EQ(a.calls.size(), 1u);
  EXPECT_EQ(a.calls[0].name, "add");
  EXPECT_EQ(a.calls[0].arguments, R"({"a": 1})");  // as templates' tojson writes it
  EXPECT_EQ(a.said, "");
  ChatMessage r{"tool", "3"};
  ASSERT_EQ(tool_history_message({{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "3"}}, r, false, names),
            "");
  EXPECT_EQ(r.role, "user");
  EXPECT_EQ(json::parse(r.content), json({{"tool_response", {{"content", "3"}, {"tool_call_id", "call_1"}}}}));
  EXPECT_EQ(r.result_of, "add");  // named by the call's id
  EXPECT_EQ(r.result, "3");
  ChatMessage unknown{"tool", "4"};
  ASSERT_EQ(
      tool_history_message({{"role", "tool"}, {"tool_call_id", "call_9"}, {"content", "4"}}, unknown, false, names),
      "");
  EXPECT_EQ(unknown.result_of, "");
  ChatMessage bad{"assistant", ""};
  EXPECT_NE(tool_history_message({{"role", "assistant"},
                                  {"tool_calls", {{{"function", {{"name", "add"}, {"arguments", "{not json"}}}}}}},
                                 bad, false, names),
            "");
}

TEST(ToolCalls, TheServerAnswersWithToolCallsWhoseArgumentsFollowTheTools) {
  auto model = test::stories_gguf();
  test::TestServer srv(model, test::default_sched());
  auto c = srv.client();
  const json messages = {{{"role", "user"}, {"content", "What is the weather in Paris?"}}};
  int calls = 0;
  auto check_call = [&](const json& tc) {
    ++calls;
    const std::string name = tc["function"]["name"];
    const json args = json::parse(tc["function"]["arguments"].get<std::string>());
    if (name == "get_weather") {
      EXPECT_TRUE(args.size() == 1 && args["city"].is_string()) << args.dump();
    } else {
      EXPECT_EQ(name, "add");
      EXPECT_TRUE(args.size() == 2 && args["a"].is_number_integer() && args["b"].is_number_integer()) << args.dump();
    }
  };
  for (int seed = 1; seed <= 4; ++seed) {
    int status = 0;
    const json r =
        test::post(c, "/v1/chat/completions",
                   {{"messages", messages}, {"tools", {kWeather, kAdd}}, {"max_tokens", 150}, {"seed", seed}}, &status);
    ASSERT_EQ(status, 200) << r.dump();
    const json& ch = r["choices"][0];
    if (ch["finish_reason"] == "length") continue;
    if (ch["finish_reason"] == "tool_calls") {
      EXPECT_TRUE(ch["message"]["content"].is_null());
      check_call(ch["message"]["tool_calls"][0]);
    } else {
      EXPECT_EQ(ch["finish_reason"], "stop");
      EXPECT_TRUE(ch["message"]["content"].is_string());
    }
  }
  EXPECT_GE(calls, 2);  // measured: 4 of 4 call a tool
  // Streamed, with the history of an earlier call and its result.
  json history = messages;
  history.push_back({{"role", "assistant"},
                     {"content", nullptr},
                     {"tool_calls",
                      {{{"id", "call_1"},
                        {"type", "function"},
                        {"function", {{"name", "get_weather"}, {"arguments", "{\"city\":\"Paris\"}"}}}}}}});
  history.push_back({{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "sunny"}});
  const std::string raw = test::post_raw(c, "/v1/chat/completions",
                                         {{"messages", history},
                                          {"tools", {kWeather, kAdd}},
                                          {"tool_choice", {{"type", "function"}, {"function", {{"name", "add"}}}}},
                                          {"max_tokens", 150},
                                          {"seed", 3},
                                          {"stream", true}});
  std::string finish;
  json streamed_call;
  for (const json& chunk : test::sse_chunks(raw)) {
    const json& ch = chunk["choices"][0];
    if (ch["delta"].contains("tool_calls")) streamed_call = ch["delta"]["tool_calls"][0];
    if (!ch["finish_reason"].is_null()) finish = ch["finish_reason"];
  }
  if (finish == "tool_calls") {
    EXPECT_EQ(streamed_call["index"], 0);
    EXPECT_EQ(streamed_call["function"]["name"], "add");
    check_call(streamed_call);
  } else {
    EXPECT_EQ(finish, "length") << raw;
  }
  // Parallel calls: every call of every answer follows its tool.
  int parallel_answers = 0, parallel_calls = 0;
  for (int seed = 1; seed <= 4; ++seed) {
    const json r = test::post(c, "/v1/chat/completions",
                              {{"messages", messages},
                               {"tools", {kWeather, kAdd}},
                               {"tool_choice", "required"},
                               {"parallel_tool_calls", true},
                               {"max_tokens", 2000},
                               {"seed", seed}});
    const json& ch = r["choices"][0];
    if (ch["finish_reason"] != "tool_calls") continue;
    ++parallel_answers;
    ASSERT_GE(ch["message"]["tool_calls"].size(), 1u) << r.dump();
    ASSERT_LE(ch["message"]["tool_calls"].size(), static_cast<size_t>(kMaxParallelCalls)) << r.dump();
    for (const json& tc : ch["message"]["tool_calls"]) {
      check_call(tc);
      ++parallel_calls;
    }
  }
  std::printf("parallel: %d answers with calls, %d calls\n", parallel_answers, parallel_calls);
  // Measured: 4 of 4 answers, 16 calls each: stories260K does not close the
  // array itself, the cap (kMaxParallelCalls) closes it, within 2000 tokens.
  EXPECT_GE(parallel_answers, 2);
  // A session describes the tools once: its later turns find them in the cache.
  const json t1 = test::post(c, "/v1/chat/completions",
                             {{"messages", messages},
                              {"tools", {kWeather, kAdd}},
                              {"tool_choice", "required"},
                              {"max_tokens", 150},
                              {"session_id", "tools1"}});
  ASSERT_TRUE(t1.contains("choices")) << t1.dump();
  json later = messages;
  later.push_back(t1["choices"][0]["message"]);
  later.push_back({{"role", "user"}, {"content", "And in Rome?"}});
  const json t2 = test::post(c, "/v1/chat/completions",
                             {{"messages", later},
                              {"tools", {kWeather, kAdd}},
                              {"tool_choice", "required"},
                              {"max_tokens", 150},
                              {"session_id", "tools1"}});
  ASSERT_TRUE(t2.contains("usage")) << t2.dump();
  const int64_t first = t1["usage"]["prompt_tokens"], second = t2["usage"]["prompt_tokens"];
  EXPECT_GT(first, 200);  // the description
  EXPECT_LT(second, 40) << first;
  // What cannot be honoured is a 400 before any work.
  for (const json& b :
       {json{{"prompt", "x"}, {"tools", {kAdd}}}, json{{"messages", messages}, {"functions", {kAdd}}}}) {
    int status = 0;
    test::post(c, b.contains("prompt") ? "/v1/completions" : "/v1/chat/completions", b, &status);
    EXPECT_EQ(status, 400) << b.dump();
  }
  int status = 0;
  const json both =
      test::post(c, "/v1/chat/completions",
                 {{"messages", messages}, {"tools", {kAdd}}, {"response_format", {{"type", "json_object"}}}}, &status);
  EXPECT_EQ(status, 400);
  EXPECT_EQ(both["error"]["param"], "tools");
}

}  // namespace
}  // namespace ss
