// Structured output against a schema: the recognizer (json_grammar.h) over
// compiled schemas (json_schema.h), checked against an independent
// value-level validator of the same subset (the oracle below) on random
// schemas, values and mutations, and by random walks whose finished texts
// must validate.
#include "sample/json_schema.h"

#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>

#include "sample/json_grammar.h"

namespace ss {
namespace {

using nlohmann::json;

std::shared_ptr<const JsonSchema> compiled(const json& schema) {
  auto s = JsonSchema::compile(schema);
  EXPECT_TRUE(s.ok()) << schema.dump() << ": " << (s.ok() ? "" : s.error().message);
  return s.ok() ? *s : JsonSchema::any_object();
}

// Every prefix feeds, and the whole is a finished value (or a top-level
// number that may end: can_end).
bool accepts(const std::shared_ptr<const JsonSchema>& schema, const std::string& text) {
  JsonGrammar g(schema);
  for (char c : text)
    if (!g.feed(std::string(1, c))) return false;
  return g.complete() || g.can_end();
}

// ---- The oracle: a JSON Schema validator for the documented subset and
// its documented choices (objects with "properties" take no other keys
// unless additionalProperties says so; oneOf read as anyOf; numbers read
// from a schema have at most 16 digits a part). ----

size_t code_points(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

// UTF-8 as one wchar_t (32 bits here) per code point, for std::wregex.
std::wstring wide(const std::string& s) {
  std::wstring w;
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    const int n = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    uint32_t cp = n == 1 ? c : c & (0xFF >> (n + 1));
    for (int k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
    w.push_back(static_cast<wchar_t>(cp));
    i += n;
  }
  return w;
}

// minLength, maxLength and pattern (ECMAScript, found anywhere unless
// anchored: std::regex_search) on a string's characters.
bool string_rules_hold(const std::string& v, const json& s) {
  const size_t n = code_points(v);
  if (n < s.value("minLength", size_t{0}) || n > s.value("maxLength", SIZE_MAX)) return false;
  if (!s.contains("pattern")) return true;
  const std::wregex re(wide(s["pattern"].get<std::string>()), std::regex::ECMAScript);
  return std::regex_search(wide(v), re);
}

bool digits_ok(const json& v) {
  const std::string t = v.dump();
  size_t run = 0;
  for (char c : t) {
    run = std::isdigit(static_cast<unsigned char>(c)) ? run + 1 : 0;
    if (run > 16) return false;
  }
  return true;
}

bool valid(const json& v, const json& s, const json& root);

bool valid_typed(const json& v, const std::string& t, const json& s, const json& root) {
  if (t == "null") return v.is_null();
  if (t == "boolean") return v.is_boolean();
  if (t == "integer" || t == "number") {
    if (!(t == "integer" ? v.is_number_integer() : v.is_number()) || !digits_ok(v)) return false;
    // As JSON Schema reads them, on the value (the random values and bounds
    // here are exact in binary, or close enough for the tolerance below).
    const double x = v.get<double>();
    if (s.contains("minimum") && !(x >= s["minimum"].get<double>())) return false;
    if (s.contains("maximum") && !(x <= s["maximum"].get<double>())) return false;
    if (s.contains("exclusiveMinimum") && !(x > s["exclusiveMinimum"].get<double>())) return false;
    if (s.contains("exclusiveMaximum") && !(x < s["exclusiveMaximum"].get<double>())) return false;
    if (s.contains("multipleOf")) {
      const double q = x / s["multipleOf"].get<double>();
      if (std::fabs(q - std::round(q)) > 1e-9 * std::max(1.0, std::fabs(q))) return false;  // doubles: relative
    }
    // (Numbers under rules are written without an exponent, as documented:
    // the random values here dump without one, and a walk's text never has one.)
    return true;
  }
  if (t == "string") return v.is_string() && string_rules_hold(v.get<std::string>(), s);
  if (t == "array") {
    if (!v.is_array()) return false;
    if (v.size() < s.value("minItems", size_t{0}) || v.size() > s.value("maxItems", SIZE_MAX)) return false;
    const json prefix = s.value("prefixItems", json::array());
    for (size_t i = 0; i < v.size(); ++i) {
      const json& sub = i < prefix.size() ? prefix[i] : s.value("items", json(true));
      if (!valid(v[i], sub, root)) return false;
    }
    return true;
  }
  if (!v.is_object()) return false;  // object
  const json props = s.value("properties", json::object());
  for (const auto& [k, e] : v.items()) {
    if (props.contains(k)) {
      if (!valid(e, props[k], root)) return false;
    } else if (s.contains("additionalProperties")) {
      if (!valid(e, s["additionalProperties"], root)) return false;
    } else if (s.contains("properties")) {
      return false;
    }
  }
  for (const json& r : s.value("required", json::array()))
    if (!v.contains(r.get<std::string>())) return false;
  return true;
}

bool valid(const json& v, const json& s, const json& root) {
  if (s.is_boolean()) return s.get<bool>();
  if (s.contains("$ref")) return valid(v, root.at(json::json_pointer(s["$ref"].get<std::string>().substr(1))), root);
  for (const char* k : {"anyOf", "oneOf", "allOf"})
    if (s.contains(k)) {
      for (const json& alt : s[k])
        if (valid(v, alt, root)) return true;
      return false;
    }
  std::vector<std::string> types;
  if (s.contains("type")) {
    if (s["type"].is_string())
      types.push_back(s["type"]);
    else
      for (const json& t : s["type"]) types.push_back(t);
  }
  auto of_type = [&](const json& x) {
    if (types.empty()) return true;
    for (const std::string& t : types)
      if (t == "integer" ? x.is_number_integer() : valid_typed(x, t, json::object(), root)) return true;
    return false;
  };
  if (s.contains("enum") || s.contains("const")) {
    const json values = s.contains("const") ? json::array({s["const"]}) : s["enum"];
    // By text, as documented: 12.0 is not the enum's 12 here (JSON Schema
    // would take it; the recognizer matches the values' compact texts).
    for (const json& e : values)
      if (e.dump() == v.dump() && of_type(e) && (!e.is_string() || string_rules_hold(e.get<std::string>(), s)))
        return true;
    return false;
  }
  if (types.empty()) {
    if (s.contains("properties") || s.contains("additionalProperties") || s.contains("required"))
      types.push_back("object");
    else if (s.contains("items") || s.contains("prefixItems") || s.contains("minItems") || s.contains("maxItems"))
      types.push_back("array");
    else if (s.contains("minLength") || s.contains("maxLength") || s.contains("pattern"))
      types.push_back("string");
    else
      return true;
  }
  for (const std::string& t : types)
    if (valid_typed(v, t, s, root)) return true;
  return false;
}

// ---- Random schemas and values. ----

const char* kNames[] = {"name", "age", "a\"b", "tags", "caf\xc3\xa9", "x", "nested", "line\nbreak"};

// Patterns over the random texts' characters: anchored or not, escapes,
// classes, a two-byte character, and lengths beside them (above).
const char* const kPatterns[] = {"^a",          "b$",      "^[ab ]+$", "a.b",       "^\\w*$",      "(ab|\")",
                                 "\\xe9",       "^[^a]*$", "\\\\",     "^.{0,2}$",  "\\n",         "^(?:a|b)b?$",
                                 "[\"\\\\]{2}", "^a*b*$",  "\\s",      "\xc3\xa9$", "^[a-z]{2,}$", "\n"};

json random_schema(std::mt19937& rng, int depth) {
  const int kinds = depth >= 3 ? 7 : 12;
  switch (rng() % kinds) {
    case 0: {
      json s = {{"type", "string"}};
      if (rng() % 2) s["minLength"] = rng() % 3;
      if (rng() % 2) s["maxLength"] = 2 + rng() % 4;
      if (rng() % 2) s["pattern"] = kPatterns[rng() % std::size(kPatterns)];
      if (rng() % 8 == 0) s.erase("type");  // "pattern" alone: a string too
      return s;
    }
    case 1: {
      json s = {{"type", rng() % 2 ? "integer" : "number"}};
      if (rng() % 4 == 0) s["multipleOf"] = std::vector<double>{2, 3, 0.5, 0.25, 0.1}[rng() % 5];
      const int64_t lo = static_cast<int64_t>(rng() % 400) - 200;
      switch (rng() % 5) {
        case 0:
          s["minimum"] = lo;
          break;
        case 1:
          s["maximum"] = lo;
          break;
        case 2:
          s["minimum"] = lo, s["maximum"] = lo + static_cast<int64_t>(rng() % 300);
          break;
        case 3:
          s["exclusiveMinimum"] = lo - 0.5, s["exclusiveMaximum"] = lo + 20.25;
          break;
        default:
          break;
      }
      return s;
    }
    case 2:
      return {{"type", "number"}, {"description", "ignored"}};
    case 3:
      return {{"type", rng() % 2 ? "boolean" : "null"}};
    case 4: {
      json s = {{"enum", {1, 12, "x", "x\"y", nullptr, 2.5, false, "ab"}}};  // containers: compact only (below)
      if (rng() % 3 == 0) s["pattern"] = "^[ab]+$";                          // the strings must match it too
      if (rng() % 3 == 0) s["maxLength"] = 1;
      return s;
    }
    case 5:
      return {{"const", rng() % 2 ? json(7) : json("seven")}};
    case 6:
      return {{"type", json::array({"string", "null"})}};
    case 7:
    case 8: {
      json s = {{"type", "object"}, {"properties", json::object()}};
      json required = json::array();
      for (size_t n = 1 + rng() % 3; n > 0; --n) {
        const std::string k = kNames[rng() % std::size(kNames)];
        s["properties"][k] = random_schema(rng, depth + 1);
        if (rng() % 2) required.push_back(k);
      }
      if (!required.empty()) s["required"] = required;
      switch (rng() % 4) {
        case 0:
          s["additionalProperties"] = false;
          break;
        case 1:
          s["additionalProperties"] = true;
          break;
        case 2:
          s["additionalProperties"] = {{"type", "integer"}};
          break;
        default:
          break;  // absent: no other keys
      }
      return s;
    }
    case 9: {
      json s = {{"type", "array"}, {"items", random_schema(rng, depth + 1)}};
      if (rng() % 3 == 0) {  // a tuple, then maybe no more items
        s["prefixItems"] = json::array();
        s["prefixItems"].push_back(random_schema(rng, depth + 1));
        s["prefixItems"].push_back(random_schema(rng, depth + 1));
        if (rng() % 2) s["items"] = false;
      }
      if (rng() % 2) s["minItems"] = rng() % 2;
      if (rng() % 2) s["maxItems"] = 1 + rng() % 3;
      return s;
    }
    case 10:
      return {{rng() % 2 ? "anyOf" : "oneOf", {random_schema(rng, depth + 1), random_schema(rng, depth + 1)}}};
    default:
      return {{"$ref", "#/$defs/item"}};
  }
}

// Up to six characters: ASCII from `ascii`, or a two-byte é.
std::string random_text(std::mt19937& rng, const std::string& ascii) {
  std::string t;
  for (size_t n = rng() % 7; n > 0; --n)
    t += rng() % 5 == 0 ? std::string("\xc3\xa9") : std::string(1, ascii[rng() % ascii.size()]);
  return t;
}

json random_leaf(std::mt19937& rng) {
  switch (rng() % 8) {
    case 0:
      return nullptr;
    case 1:
      return rng() % 2 == 0;
    case 2:
      return static_cast<int64_t>(rng() % 2000) - 1000;
    case 3:
      return (static_cast<double>(rng() % 2000) - 1000) / 8;
    case 4:
      return random_text(rng, "ab\"\\\n\x01");
    case 5:
      return "x";
    case 6:
      return json::array({1, 2});
    default:
      return json{{"k", true}};
  }
}

// A value the schema accepts most of the time (a random leaf sometimes).
json random_value(std::mt19937& rng, const json& s, const json& root, int depth) {
  if (rng() % 12 == 0 || depth > 6) return random_leaf(rng);
  if (s.contains("$ref"))
    return random_value(rng, root.at(json::json_pointer(s["$ref"].get<std::string>().substr(1))), root, depth + 1);
  for (const char* k : {"anyOf", "oneOf"})
    if (s.contains(k)) return random_value(rng, s[k][rng() % s[k].size()], root, depth + 1);
  if (s.contains("enum")) return s["enum"][rng() % s["enum"].size()];
  if (s.contains("const")) return s["const"];
  std::string t = "any";
  if (s.contains("type"))
    t = s["type"].is_string() ? s["type"].get<std::string>() : s["type"][rng() % s["type"].size()].get<std::string>();
  if (t == "null") return nullptr;
  if (t == "boolean") return rng() % 2 == 0;
  if (t == "integer")  // near the random schemas' bounds often, far from them sometimes
    return rng() % 2 ? static_cast<int64_t>(rng() % 600) - 300 : static_cast<int64_t>(rng() % 200000) - 100000;
  if (t == "number")
    return rng() % 2 ? json(static_cast<int64_t>(rng() % 100)) : json((static_cast<double>(rng() % 1000) - 500) / 4);
  if (t == "string") return random_text(rng, "ab \"\\");
  if (t == "array") {
    json a = json::array();
    const json prefix = s.value("prefixItems", json::array());
    for (size_t n = rng() % 4, i = 0; i < n; ++i)
      a.push_back(random_value(rng, i < prefix.size() ? prefix[i] : s.value("items", json::object()), root, depth + 1));
    return a;
  }
  if (t == "object") {
    json o = json::object();
    const json props = s.value("properties", json::object());
    for (const auto& [k, sub] : props.items())
      if (rng() % 4 != 0) o[k] = random_value(rng, sub, root, depth + 1);
    if (rng() % 5 == 0) o["extra"] = static_cast<int64_t>(rng() % 10);
    return o;
  }
  return random_leaf(rng);
}

// ---- Tests. ----

TEST(JsonSchema, RecognizerAgreesWithTheValidatorOnRandomSchemasAndValues) {
  std::mt19937 rng(21);
  int valid_n = 0, invalid_n = 0;
  for (int i = 0; i < 400; ++i) {
    json schema = random_schema(rng, 0);
    schema["$defs"] = {{"item", random_schema(rng, 3)}};
    const auto s = compiled(schema);
    for (int j = 0; j < 10; ++j) {
      const json v = random_value(rng, schema, schema, 0);
      const std::string text = v.dump(rng() % 3 == 0 ? 1 : -1);
      const bool want = valid(v, schema, schema);
      ASSERT_EQ(accepts(s, text), want) << schema.dump() << "\n" << text;
      (want ? valid_n : invalid_n)++;
    }
  }
  EXPECT_GT(valid_n, 1000);
  EXPECT_GT(invalid_n, 300);
}

// Random walks over tokens the mask allows: the mask is each token's own
// feed, none gets stuck, and each walk that finishes is a text the
// validator accepts.
TEST(JsonSchema, RandomWalksNeverStickAndFinishValid) {
  std::mt19937 rng(22);
  std::vector<std::string> tokens;  // printable ASCII, a few words, é whole
  for (char c = ' '; c <= '~'; ++c) tokens.emplace_back(1, c);
  for (const char* t : {"\"name\"", "\"age\"", "\"a\\\"b\"", "\"tags\"", "null", "true", "12", "\"x\"", "\": ", "\"}",
                        "\xc3\xa9", "ab c",    "\xc3\xa9xy", "na",       "me",   "ag",   "ta", "gs",    "caf",  "line"})
    tokens.emplace_back(t);
  int finished = 0;
  for (int i = 0; i < 300; ++i) {
    json schema = random_schema(rng, 0);
    schema["$defs"] = {{"item", random_schema(rng, 3)}};
    JsonGrammar g(compiled(schema));
    std::string text;
    for (int step = 0; step < 200 && !g.complete(); ++step) {
      std::vector<float> logits(tokens.size(), 0.0f);
      const size_t allowed = g.mask(tokens, logits);
      // The mask's shortcuts (first bytes, plain text inside strings) decide
      // as feeding each token to a copy does.
      for (size_t id = 0; id < tokens.size(); ++id) {
        JsonGrammar copy = g;
        ASSERT_EQ(!std::isinf(logits[id]), copy.feed(tokens[id])) << schema.dump() << "\n" << text << "|" << tokens[id];
      }
      if (allowed == 0) {
        // Only a top-level number may leave nothing to add but the end.
        ASSERT_TRUE(g.can_end()) << schema.dump() << "\n" << text;
        break;
      }
      // Prefer closers half the time, so walks finish.
      std::vector<size_t> ok;
      for (size_t id = 0; id < tokens.size(); ++id)
        if (!std::isinf(logits[id])) ok.push_back(id);
      size_t pick = ok[rng() % ok.size()];
      if (rng() % 2)
        for (size_t id : ok)
          if (tokens[id] == "}" || tokens[id] == "]" || tokens[id] == "\"" || tokens[id] == "\"}") pick = id;
      ASSERT_TRUE(g.feed(tokens[pick]));
      text += tokens[pick];
    }
    if (!g.complete() && !g.can_end()) continue;
    ++finished;
    json v;
    try {
      v = json::parse(text);
    } catch (const json::out_of_range&) {
      continue;  // 1e999: JSON's grammar allows it, a double cannot hold it
    } catch (const json::exception& e) {
      FAIL() << e.what() << "\n" << schema.dump() << "\n" << text;
    }
    ASSERT_TRUE(valid(v, schema, schema)) << schema.dump() << "\n" << text;
  }
  EXPECT_GT(finished, 150);
}

TEST(JsonSchema, ObjectsTakeTheirPropertiesOnceAndTheRequiredOnes) {
  const auto s = compiled({{"type", "object"},
                           {"properties", {{"name", {{"type", "string"}}}, {"age", {{"type", "integer"}}}}},
                           {"required", {"name", "age"}},
                           {"additionalProperties", false}});
  for (const char* good : {R"({"name":"Al","age":3})", R"({ "age" : -30 , "name" : "" })"})
    EXPECT_TRUE(accepts(s, good)) << good;
  for (const char* bad :
       {R"({"name":"Al"})", R"({"nam":"Al","age":3})", R"({"name":"Al","age":3.5})", R"({"name":"Al","age":3,"x":1})",
        R"({"name":"Al","name":"B","age":3})", R"({"name":1,"age":3})", R"(["name"])", R"({"age":1e3,"name":"A"})"})
    EXPECT_FALSE(accepts(s, bad)) << bad;
  // Keys are matched as written, one byte at a time: "na" can go on, "nx" cannot.
  JsonGrammar g(s);
  EXPECT_TRUE(g.feed("{\"na"));
  EXPECT_FALSE(g.feed("x"));
  // Extra keys by schema; required keys absent from properties.
  const auto extra = compiled({{"properties", {{"a", {{"type", "null"}}}}},
                               {"additionalProperties", {{"type", "boolean"}}},
                               {"required", {"b"}}});
  EXPECT_TRUE(accepts(extra, R"({"b":true,"z":false,"a":null})"));
  EXPECT_FALSE(accepts(extra, R"({"a":null})"));
  EXPECT_FALSE(accepts(extra, R"({"b":1})"));
}

TEST(JsonSchema, LiteralsAnyOfArraysStringsAndRecursion) {
  const auto e = compiled({{"enum", {1, 12, "x"}}});
  for (const char* good : {"1", "12", "\"x\""}) EXPECT_TRUE(accepts(e, good)) << good;
  for (const char* bad : {"2", "123", "\"y\"", "1.0", "\"x\"1"}) EXPECT_FALSE(accepts(e, bad)) << bad;
  JsonGrammar n(e);
  ASSERT_TRUE(n.feed("1"));
  EXPECT_TRUE(n.can_end());  // "1" is whole; "12" may still come
  EXPECT_FALSE(n.complete());

  const auto opt = compiled({{"anyOf", {{{"type", "integer"}}, {{"type", "string"}, {"maxLength", 2}}}}});
  for (const char* good : {"-7", "\"\"", "\"\xc3\xa9\\n\""}) EXPECT_TRUE(accepts(opt, good)) << good;
  for (const char* bad : {"\"abc\"", "1.5", "null"}) EXPECT_FALSE(accepts(opt, bad)) << bad;

  const auto arr = compiled({{"type", "array"}, {"items", {{"type", "boolean"}}}, {"minItems", 1}, {"maxItems", 2}});
  for (const char* good : {"[true]", "[ false , true ]"}) EXPECT_TRUE(accepts(arr, good)) << good;
  for (const char* bad : {"[]", "[true,true,true]", "[1]"}) EXPECT_FALSE(accepts(arr, bad)) << bad;

  const json tree = {
      {"type", "object"},
      {"properties", {{"v", {{"type", "integer"}}}, {"kids", {{"type", "array"}, {"items", {{"$ref", "#"}}}}}}},
      {"required", {"v"}}};
  const auto t = compiled(tree);
  EXPECT_TRUE(accepts(t, R"({"v":1,"kids":[{"v":2},{"v":3,"kids":[{"v":4}]}]})"));
  EXPECT_FALSE(accepts(t, R"({"v":1,"kids":[{"w":2}]})"));

  // Digits are bounded where a schema asks for a number (16 a part).
  const auto num = compiled({{"type", "number"}});
  EXPECT_TRUE(accepts(num, "1234567890123456.25e-12"));
  EXPECT_FALSE(accepts(num, "12345678901234567"));
}

// The mask's shortcut for plain text inside strings and keys, at the edges
// it must respect: a string's room, names already used, free keys.
TEST(JsonSchema, MaskShortcutsForTextDecideAsFeeding) {
  const std::vector<std::string> tokens = {"bc", "bcd", "b\xc3\xa9", "bc\"", "me", "mx", "b", "e\"", "zz z"};
  auto check = [&](const json& schema, const std::string& prefix, const std::vector<bool>& want) {
    JsonGrammar g(compiled(schema));
    ASSERT_TRUE(g.feed(prefix)) << prefix;
    std::vector<float> logits(tokens.size(), 0.0f);
    g.mask(tokens, logits);
    for (size_t id = 0; id < tokens.size(); ++id) {
      JsonGrammar copy = g;
      EXPECT_EQ(copy.feed(tokens[id]), static_cast<bool>(want[id])) << prefix << "|" << tokens[id];
      EXPECT_EQ(!std::isinf(logits[id]), static_cast<bool>(want[id])) << prefix << "|" << tokens[id];
    }
  };
  // Room for two more characters: "bc" and "bé" fit, "bcd" does not.
  check({{"type", "string"}, {"maxLength", 3}}, "\"a", {true, false, true, true, true, true, true, true, false});
  const json names = {{"properties", {{"name", true}, {"nab", true}}}};
  // "na" typed: "me" finishes "name" (unused), "b" begins "nab".
  check(names, "{\"na", {false, false, false, false, true, false, true, false, false});
  // "name" used: only "nab" is left.
  check(names, "{\"name\":1,\"na", {false, false, false, false, false, false, true, false, false});
  // Other keys allowed: any plain text goes on.
  check({{"type", "object"}}, "{\"na", {true, true, true, true, true, true, true, true, true});
}

// Strings and keys hold valid UTF-8 (a byte-fallback token cannot leave a
// broken character), and lengths count characters.
TEST(JsonSchema, StringsAreValidUtf8AndLengthsCountCharacters) {
  const auto s = compiled({{"type", "string"}, {"maxLength", 2}});
  for (const char* good : {"\"\xc3\xa9\xe2\x82\xac\"", "\"\xf0\x9f\x98\x80\"", "\"\xed\x9f\xbf\""})
    EXPECT_TRUE(accepts(s, good)) << good;
  for (const char* bad : {"\"\xc3\"", "\"\x80\"", "\"\xc0\xaf\"", "\"\xe0\x80\xaf\"", "\"\xed\xa0\x80\"",
                          "\"\xf4\x90\x80\x80\"", "\"\xff\"", "\"\xc3\xa9\xc3\xa9\xc3\xa9\""})
    EXPECT_FALSE(accepts(s, bad)) << bad;
  JsonGrammar g(s);
  ASSERT_TRUE(g.feed("\"\xe2"));
  EXPECT_FALSE(g.feed("\""));  // the character is not finished
  std::vector<std::string> tokens = {"\x82", "\x82\xac", "\x82\xacxy", "a"};
  std::vector<float> logits(tokens.size(), 0.0f);
  EXPECT_EQ(g.mask(tokens, logits), 2u);  // "\x82" (one more to come) and "\x82\xac" (€: one character)
  JsonGrammar any;
  EXPECT_FALSE(any.feed("{\"\xc3\":1}"));  // keys too
}

// Bounds and multipleOf on numbers with fractions, decided exactly in
// units of 1e-16 (number_rules.h).
TEST(JsonSchema, NumberRulesHoldWhileDigitsAreWritten) {
  const auto unit = compiled({{"type", "number"}, {"minimum", 0}, {"exclusiveMaximum", 1}});
  for (const char* good : {"0", "0.5", "0.9999999999999999", "-0", "0.0"}) EXPECT_TRUE(accepts(unit, good)) << good;
  for (const char* bad : {"1", "1.0", "-0.1", "1e-3", "2", "0.5e0"}) EXPECT_FALSE(accepts(unit, bad)) << bad;
  JsonGrammar u(unit);
  EXPECT_FALSE(u.feed("1"));  // 1 and 10-19... are all past it
  const auto price = compiled({{"type", "object"},
                               {"properties", {{"p", {{"type", "number"}, {"multipleOf", 0.01}, {"minimum", 0.5}}}}},
                               {"required", {"p"}}});
  EXPECT_TRUE(accepts(price, "{\"p\": 12.34}"));
  EXPECT_TRUE(accepts(price, "{\"p\": 0.5}"));
  EXPECT_FALSE(accepts(price, "{\"p\": 0.49}"));
  JsonGrammar p(price);
  EXPECT_TRUE(p.feed("{\"p\": 12.34"));
  EXPECT_FALSE(p.feed("5"));  // a third decimal is no multiple of 0.01
  EXPECT_TRUE(p.feed("0}"));  // 12.340 is
  // 0.1 as written, not as the double nearest it: 0.3 is a multiple.
  const auto tenths = compiled({{"type", "number"}, {"multipleOf", 0.1}});
  EXPECT_TRUE(accepts(tenths, "0.3"));
  EXPECT_TRUE(accepts(tenths, "-7.2"));
  EXPECT_FALSE(accepts(tenths, "0.35"));
  // An integer is a multiple of 1 too; negative bounds; a far maximum.
  const auto halves = compiled({{"type", "integer"}, {"multipleOf", 1.5}, {"maximum", -2}});
  EXPECT_TRUE(accepts(halves, "-3"));
  EXPECT_FALSE(accepts(halves, "-4.5"));
  EXPECT_FALSE(accepts(halves, "0"));
  EXPECT_TRUE(accepts(halves, "-300"));
  const auto big = compiled({{"type", "number"}, {"exclusiveMinimum", 1e15}});
  EXPECT_TRUE(accepts(big, "1000000000000000.5"));
  EXPECT_FALSE(accepts(big, "1000000000000000"));
}

TEST(JsonSchema, FixedPointParsingIsExactAndRoundsOutward) {
  bool exact = false;
  EXPECT_TRUE(parse_fixed("0.1", false, &exact) == kFixedOne / 10 && exact);
  EXPECT_TRUE(parse_fixed("123", false, &exact) == 123 * kFixedOne && exact);
  EXPECT_TRUE(parse_fixed("-2.5e-1", true, &exact) == -kFixedOne / 4 && exact);
  EXPECT_TRUE(parse_fixed("1e-17", true, &exact) == 1 && !exact);  // up to the next unit
  EXPECT_TRUE(parse_fixed("1e-17", false, &exact) == 0 && !exact);
  EXPECT_TRUE(parse_fixed("-1.5e-16", false, &exact) == -2 && !exact);
  EXPECT_TRUE(parse_fixed("-1.5e-16", true, &exact) == -1 && !exact);
  EXPECT_TRUE(parse_fixed("1e40", false, &exact) == kFixedLimit);
  EXPECT_TRUE(parse_fixed("-1E+40", true, &exact) == -kFixedLimit);
  EXPECT_TRUE(parse_fixed("0.30000000000000000001", false, &exact) == 3 * kFixedOne / 10 && !exact);
  for (const char* bad : {"", "-", "1e", ".", "1x", "null"}) EXPECT_FALSE(parse_fixed(bad, false, &exact)) << bad;
  NumberRules r;
  r.min = -5, r.max = 7, r.step = 4;
  EXPECT_TRUE(r.reachable(-9, -3));  // -4
  EXPECT_FALSE(r.reachable(-3, -1));
  EXPECT_TRUE(r.allows(0));
  EXPECT_FALSE(r.allows(8));
}

TEST(JsonSchema, IntegerBoundsHoldWhileDigitsAreWritten) {
  const auto two_digits = compiled({{"type", "integer"}, {"minimum", 10}, {"maximum", 99}});
  JsonGrammar g(two_digits);
  EXPECT_TRUE(g.feed("5"));  // 50-59 are still ahead
  EXPECT_FALSE(g.can_end());
  for (const char* bad : {"0", "-", "100", "9 ", "1e1"}) EXPECT_FALSE(accepts(two_digits, bad)) << bad;
  for (const char* good : {"10", "99", "42"}) EXPECT_TRUE(accepts(two_digits, good)) << good;
  const auto around_zero = compiled({{"type", "integer"}, {"exclusiveMinimum", -1}, {"maximum", 0.5}});
  for (const char* good : {"0", "-0"}) EXPECT_TRUE(accepts(around_zero, good)) << good;
  for (const char* bad : {"-1", "1", "-01"}) EXPECT_FALSE(accepts(around_zero, bad)) << bad;
  // In an object: the number ends where its bounds allow it to.
  const auto obj = compiled({{"type", "object"},
                             {"properties", {{"n", {{"type", "integer"}, {"minimum", 1}, {"maximum", 3}}}}},
                             {"required", {"n"}}});
  EXPECT_TRUE(accepts(obj, "{\"n\": 3}"));
  EXPECT_FALSE(accepts(obj, "{\"n\": 4}"));
  EXPECT_FALSE(accepts(obj, "{\"n\": 0}"));
  JsonGrammar o(obj);
  EXPECT_TRUE(o.feed("{\"n\": 2"));
  EXPECT_FALSE(o.feed("0"));  // 20 is past the maximum
}

// "pattern" reads the characters a string stands for (escapes decoded),
// anywhere in it unless anchored, beside its length limits.
TEST(JsonSchema, PatternsHoldOnTheDecodedCharacters) {
  const auto code = compiled({{"type", "string"}, {"pattern", "^[A-Z]{2}-\\d{3}$"}});
  EXPECT_TRUE(accepts(code, "\"AB-123\""));
  EXPECT_TRUE(accepts(code, "\"\\u0041B-123\""));  // \u0041 is A
  EXPECT_FALSE(accepts(code, "\"AB-12\""));
  EXPECT_FALSE(accepts(code, "\"ab-123\""));
  JsonGrammar g(code);
  EXPECT_TRUE(g.feed("\"A"));
  EXPECT_FALSE(g.feed("1"));  // refused as soon as it is written
  const auto esc = compiled({{"type", "string"}, {"pattern", "^\\n\"\u00e9$"}});
  EXPECT_TRUE(accepts(esc, "\"\\n\\\"\xC3\xA9\""));
  EXPECT_TRUE(accepts(esc, "\"\\u000a\\\"\\u00E9\""));
  EXPECT_FALSE(accepts(esc, "\"n\\\"\xC3\xA9\""));
  // Surrogate escapes are not followed; the character itself is.
  const auto any = compiled({{"type", "string"}, {"pattern", "^.$"}});
  EXPECT_FALSE(accepts(any, "\"\\ud83d\\ude00\""));
  EXPECT_TRUE(accepts(any, "\"\xF0\x9F\x98\x80\""));
  // Unanchored: found anywhere; the string may not close before it is.
  const auto has_b = compiled({{"pattern", "b"}});  // "pattern" alone: a string
  EXPECT_TRUE(accepts(has_b, "\"abc\""));
  EXPECT_FALSE(accepts(has_b, "\"ac\""));
  JsonGrammar h(has_b);
  EXPECT_TRUE(h.feed("\"a"));
  JsonGrammar h2 = h;
  EXPECT_FALSE(h2.feed("\""));
  EXPECT_TRUE(h.feed("b\""));
  // With a length limit: no room left for the 'c' it needs is refused early.
  const auto short_c = compiled({{"type", "string"}, {"pattern", "^[ab]*c$"}, {"maxLength", 3}});
  JsonGrammar s(short_c);
  EXPECT_TRUE(s.feed("\"aa"));
  JsonGrammar s2 = s;
  EXPECT_FALSE(s2.feed("a"));
  EXPECT_TRUE(s.feed("c\""));
  // Enum strings keep the string keywords beside them.
  const auto e = compiled({{"enum", {"ab", "x", 3}}, {"pattern", "^a"}});
  EXPECT_TRUE(accepts(e, "\"ab\""));
  EXPECT_TRUE(accepts(e, "3"));
  EXPECT_FALSE(accepts(e, "\"x\""));
}

// ---- String formats, checked against field-by-field validators (calendar
// arithmetic, ranges), not against regexes. ----

bool digits_at(const std::string& s, std::initializer_list<size_t> at) {
  for (size_t i : at)
    if (i >= s.size() || !std::isdigit(static_cast<unsigned char>(s[i]))) return false;
  return true;
}

bool is_date(const std::string& s) {
  if (s.size() != 10 || s[4] != '-' || s[7] != '-' || !digits_at(s, {0, 1, 2, 3, 5, 6, 8, 9})) return false;
  const int y = std::stoi(s.substr(0, 4)), m = std::stoi(s.substr(5, 2)), d = std::stoi(s.substr(8, 2));
  const bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
  static const int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return m >= 1 && m <= 12 && d >= 1 && d <= kDays[m - 1] + (m == 2 && leap);
}

bool is_time(const std::string& s) {
  if (s.size() < 9 || s[2] != ':' || s[5] != ':' || !digits_at(s, {0, 1, 3, 4, 6, 7})) return false;
  if (std::stoi(s.substr(0, 2)) > 23 || std::stoi(s.substr(3, 2)) > 59 || std::stoi(s.substr(6, 2)) > 60) return false;
  size_t i = 8;
  if (s[i] == '.') {
    const size_t start = ++i;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
    if (i == start) return false;
  }
  const std::string zone = s.substr(i);
  if (zone == "Z" || zone == "z") return true;
  return zone.size() == 6 && (zone[0] == '+' || zone[0] == '-') && zone[3] == ':' && digits_at(zone, {1, 2, 4, 5}) &&
         std::stoi(zone.substr(1, 2)) <= 23 && std::stoi(zone.substr(4, 2)) <= 59;
}

bool is_uuid(const std::string& s) {
  if (s.size() != 36) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    const bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash != (s[i] == '-') || (!dash && !std::isxdigit(static_cast<unsigned char>(s[i])))) return false;
  }
  return true;
}

bool is_ipv4(const std::string& s) {
  int parts = 0;
  for (size_t i = 0; i <= s.size(); ++parts) {
    const size_t dot = std::min(s.find('.', i), s.size());
    const std::string p = s.substr(i, dot - i);
    if (p.empty() || p.size() > 3 || (p.size() > 1 && p[0] == '0')) return false;
    for (char c : p)
      if (!std::isdigit(static_cast<unsigned char>(c))) return false;
    if (std::stoi(p) > 255) return false;
    i = dot + 1;
  }
  return parts == 4;
}

TEST(JsonSchema, FormatsShapeStringsAsTheirStandardsSay) {
  std::mt19937 rng(31);
  auto num = [&](int lo, int hi, int width) {
    const int v = std::uniform_int_distribution<int>(lo, hi)(rng);
    std::string t = std::to_string(v);
    return std::string(static_cast<size_t>(std::max(0, width - static_cast<int>(t.size()))), '0') + t;
  };
  const auto date = compiled({{"type", "string"}, {"format", "date"}});
  const auto time = compiled({{"type", "string"}, {"format", "time"}});
  const auto date_time = compiled({{"type", "string"}, {"format", "date-time"}});
  const auto uuid = compiled({{"type", "string"}, {"format", "uuid"}});
  const auto ipv4 = compiled({{"type", "string"}, {"format", "ipv4"}});
  int valid_n = 0, texts = 0;
  const char* kYears[] = {"1900", "2000", "2024", "2023", "2100", "0000", "1600", "1996"};
  const char* kZones[] = {"Z", "z", "+05:30", "-24:00", "+23:59", "", "+5:30", "-00:00"};
  const char* kOctets[] = {"0", "00", "01", "9", "10", "99", "100", "199", "200", "249", "250", "255", "256", "300"};
  const std::string hex = "0123456789abcdefABCDEFg";
  for (int i = 0; i < 3000; ++i) {
    std::string y = rng() % 2 ? std::string(kYears[rng() % std::size(kYears)]) : num(0, 9999, 4);
    const std::string d = y + "-" + num(0, 13, 2) + "-" + num(0, 32, 2);
    std::string t = num(0, 25, 2) + ":" + num(0, 61, 2) + ":" + num(0, 61, 2);
    if (rng() % 3 == 0) t += "." + num(0, 999, 1);
    t += kZones[rng() % std::size(kZones)];
    const std::string sep = std::string(1, "Tt "[rng() % 3]);
    std::string u;
    const size_t digits = rng() % 8 == 0 ? hex.size() : hex.size() - 1;  // 'g' in one uuid of 8
    for (int k = 0; k < 36; ++k) u += (k == 8 || k == 13 || k == 18 || k == 23) ? '-' : hex[rng() % digits];
    std::string ip;
    int parts = rng() % 3 != 0 ? 4 : 3;  // one value drawn a statement: the same draws with any compiler
    parts += rng() % 9 == 0 ? 1 : 0;
    for (int k = 0; k < parts; ++k) ip += (k ? "." : "") + std::string(kOctets[rng() % std::size(kOctets)]);
    const std::pair<std::shared_ptr<const JsonSchema>, std::pair<std::string, bool>> cases[] = {
        {date, {d, is_date(d)}},
        {time, {t, is_time(t)}},
        {date_time, {d + sep + t, is_date(d) && sep != " " && is_time(t)}},
        {uuid, {u, is_uuid(u)}},
        {ipv4, {ip, is_ipv4(ip)}},
    };
    for (const auto& [schema, c] : cases) {
      ASSERT_EQ(accepts(schema, json(c.first).dump()), c.second) << c.first;
      valid_n += c.second;
      ++texts;
    }
  }
  EXPECT_GT(valid_n, texts / 5);
  EXPECT_LT(valid_n, texts * 4 / 5);
  const auto email = compiled({{"type", "string"}, {"format", "email"}});
  for (const char* good : {"a@b.co", "first.last+tag@mail.example.org", "x_y@a-b.c1"})
    EXPECT_TRUE(accepts(email, json(good).dump())) << good;
  for (const char* bad : {"a@b", "@b.co", "a..b@c.de", "a@-b.co", "a@b.co.", "a b@c.de", "a@b_c.de"})
    EXPECT_FALSE(accepts(email, json(bad).dump())) << bad;
  // Unknown formats, and a format beside a pattern, stay annotations.
  EXPECT_TRUE(accepts(compiled({{"type", "string"}, {"format", "hostname"}}), "\"not a host!\""));
  EXPECT_TRUE(accepts(compiled({{"type", "string"}, {"format", "date"}, {"pattern", "^x"}}), "\"xy\""));
}

// pydantic's Tuple[int, str]: prefixItems, and items for the rest.
TEST(JsonSchema, TuplesTakeTheirItemsInOrder) {
  const auto pair = compiled({{"type", "array"},
                              {"prefixItems", {{{"type", "integer"}}, {{"type", "string"}}}},
                              {"minItems", 2},
                              {"maxItems", 2}});
  EXPECT_TRUE(accepts(pair, "[1, \"a\"]"));
  for (const char* bad : {"[\"a\", 1]", "[1]", "[1, \"a\", 2]", "[]"}) EXPECT_FALSE(accepts(pair, bad)) << bad;
  const auto rest =
      compiled({{"type", "array"}, {"prefixItems", {{{"type", "string"}}}}, {"items", {{"type", "null"}}}});
  EXPECT_TRUE(accepts(rest, "[\"x\", null, null]"));
  EXPECT_TRUE(accepts(rest, "[]"));
  EXPECT_FALSE(accepts(rest, "[null]"));
  const auto closed = compiled({{"prefixItems", {true, true}}, {"items", false}});  // "array" inferred
  EXPECT_TRUE(accepts(closed, "[1, {}]"));
  EXPECT_FALSE(accepts(closed, "[1, 2, 3]"));
  EXPECT_FALSE(JsonSchema::compile({{"prefixItems", {true}}, {"items", false}, {"minItems", 2}}).ok());
  EXPECT_FALSE(JsonSchema::compile({{"type", "array"}, {"prefixItems", true}}).ok());
}

TEST(JsonSchema, UnsupportedOrBrokenSchemasAreErrorsThatSayWhere) {
  const json bad[] = {
      {{"type", "string"}, {"pattern", "(a)\\1"}},
      {{"type", "string"}, {"pattern", "^a|b"}},
      {{"type", "string"}, {"pattern", 5}},
      {{"type", "string"}, {"pattern", "^a{3}$"}, {"maxLength", 2}},
      {{"type", "string"}, {"pattern", "[ab]*a[ab]{14}"}},
      {{"enum", {"x", "y"}}, {"pattern", "^a"}},
      {{"type", "number"}, {"multipleOf", 0}},
      {{"type", "number"}, {"multipleOf", 1e-20}},
      {{"type", "number"}, {"minimum", 0.5}, {"maximum", 0.4}},
      {{"type", "number"}, {"minimum", 1e20}},
      {{"type", "integer"}, {"multipleOf", 0.5}, {"minimum", 0.1}, {"maximum", 0.9}},
      {{"type", "object"}, {"properties", {{"age", {{"type", "string"}, {"minimum", 0}}}}}},
      {{"minimum", 0}},
      {{"type", "integer"}, {"minimum", 5}, {"maximum", 2}},
      {{"type", "integer"}, {"enum", {1, 2}}, {"maximum", 2}},
      {{"type", "integer"}, {"maximum", "ten"}},
      {{"type", "strin"}},
      {{"type", json::array()}},
      {{"enum", json::array()}},
      {{"$ref", "#/$defs/missing"}},
      {{"$ref", "#/$defs/a"}, {"$defs", {{"a", {{"$ref", "#/$defs/b"}}}, {"b", {{"$ref", "#/$defs/a"}}}}}},
      {{"$ref", "http://example.com/s.json"}},
      {{"allOf", {{{"type", "string"}}, {{"maxLength", 2}}}}},
      {{"type", "string"}, {"minLength", 5}, {"maxLength", 2}},
      {{"type", "array"}, {"minItems", -1}},
      {{"properties", {{"a", false}}}},
      {{"type", "object"}, {"properties", {{"a", {{"type", "null"}}}}}, {"required", {"b"}}},
      {{"type", "string"}, {"enum", {1, 2}}},
      json(3),
  };
  for (const json& s : bad) {
    auto r = JsonSchema::compile(s);
    ASSERT_FALSE(r.ok()) << s.dump();
    EXPECT_NE(r.error().message.find("JSON schema at "), std::string::npos) << r.error().message;
  }
  EXPECT_NE(JsonSchema::compile(bad[11]).error().message.find("/properties/age"), std::string::npos);
  json wide = {{"type", "object"}, {"properties", json::object()}};
  for (int i = 0; i <= JsonSchema::kMaxProperties; ++i) wide["properties"]["p" + std::to_string(i)] = true;
  EXPECT_FALSE(JsonSchema::compile(wide).ok());
  json deep = json::object();
  for (int i = 0; i < 200; ++i) deep = {{"type", "array"}, {"items", deep}};
  EXPECT_FALSE(JsonSchema::compile(deep).ok());
  // A value may open at most kMaxAlternatives readings (anyOf in anyOf too).
  json wide_any = {{"anyOf", json::array()}};
  for (int i = 0; i <= JsonSchema::kMaxAlternatives; ++i) wide_any["anyOf"].push_back({{"const", i}});
  EXPECT_FALSE(JsonSchema::compile(wide_any).ok());
  json nine = {{"anyOf", json::array()}};
  for (int i = 0; i < 9; ++i) nine["anyOf"].push_back({{"const", i}});
  EXPECT_TRUE(JsonSchema::compile(nine).ok());
  EXPECT_FALSE(JsonSchema::compile({{"anyOf", json::array({nine, nine, nine, nine, nine, nine, nine, nine})}}).ok());
  // Annotations are no errors; a self-referring anyOf is bounded, not endless.
  EXPECT_TRUE(JsonSchema::compile({{"title", "T"}, {"type", "string"}, {"format", "date-time"}, {"x-vendor", 1}}).ok());
  const auto loop =
      compiled({{"$defs", {{"a", {{"anyOf", {{{"$ref", "#/$defs/a"}}, {{"type", "null"}}}}}}}}, {"$ref", "#/$defs/a"}});
  EXPECT_TRUE(accepts(loop, "null"));
}

}  // namespace
}  // namespace ss
