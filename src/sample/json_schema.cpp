#include "sample/json_schema.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <utility>

#include "sample/gbnf.h"
#include "sample/regex_to_gbnf.h"
#include "sample/string_formats.h"
#include "util/utf8.h"

namespace ss {

using nlohmann::json;

JsonSchema::JsonSchema() {
  any_.kind = SchemaNode::Kind::Any;
  any_object_.kind = SchemaNode::Kind::Object;
  any_object_.additional = &any_;
  any_array_.kind = SchemaNode::Kind::Array;
  any_array_.items = &any_;
  any_string_.kind = SchemaNode::Kind::String;
  any_number_.kind = SchemaNode::Kind::Number;
  any_literal_.kind = SchemaNode::Kind::Literal;
  any_literal_.texts = {"true", "false", "null"};
  root_ = &any_;
}

std::shared_ptr<const JsonSchema> JsonSchema::any_object() {
  auto s = std::make_shared<JsonSchema>();
  s->root_ = &s->any_object_;
  return s;
}

namespace {

// Keywords of JSON Schema that constrain values in ways this compiler does
// not implement: refused. Others it does not read (title, description,
// default, examples, format, $defs, vendor extensions) only describe, and
// are ignored as a validator ignores unknown keywords.
const std::set<std::string>& refused() {
  static const std::set<std::string> k = {"patternProperties",
                                          "not",
                                          "if",
                                          "then",
                                          "else",
                                          "dependentRequired",
                                          "dependentSchemas",
                                          "dependencies",
                                          "minProperties",
                                          "maxProperties",
                                          "uniqueItems",
                                          "contains",
                                          "minContains",
                                          "maxContains",
                                          "propertyNames",
                                          "unevaluatedProperties",
                                          "unevaluatedItems",
                                          "additionalItems",
                                          "$dynamicRef",
                                          "$recursiveRef"};
  return k;
}

// Keywords this compiler reads.
const std::set<std::string>& understood() {
  static const std::set<std::string> k = {"type",
                                          "properties",
                                          "required",
                                          "additionalProperties",
                                          "items",
                                          "prefixItems",
                                          "minItems",
                                          "maxItems",
                                          "minLength",
                                          "maxLength",
                                          "pattern",
                                          "enum",
                                          "const",
                                          "anyOf",
                                          "oneOf",
                                          "allOf",
                                          "$ref",
                                          "minimum",
                                          "maximum",
                                          "exclusiveMinimum",
                                          "exclusiveMaximum",
                                          "multipleOf"};
  return k;
}

const char* kSupported =
    "supported: type, properties, required, additionalProperties, items, prefixItems, minItems, maxItems, "
    "minLength, maxLength, pattern, minimum, maximum, exclusiveMinimum, exclusiveMaximum, multipleOf (numbers), "
    "enum, const, anyOf, oneOf, allOf of one schema, $ref";

const char* const kKeywords[] = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"};

bool type_matches(const json& v, const std::string& t) {
  if (t == "object") return v.is_object();
  if (t == "array") return v.is_array();
  if (t == "string") return v.is_string();
  if (t == "number") return v.is_number();
  if (t == "integer")
    return v.is_number_integer() || (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>());
  if (t == "boolean") return v.is_boolean();
  return v.is_null();  // "null"
}

}  // namespace

class SchemaCompiler {
 public:
  static constexpr uint32_t kNone = std::numeric_limits<uint32_t>::max();
  SchemaCompiler(const json& doc, JsonSchema& out, JsonSchema::PatternBudget& budget)
      : doc_(doc), out_(out), budget_(budget) {}

  Result<const SchemaNode*> compile(const json& s, const std::string& at, int nesting) {
    if (nesting > JsonSchema::kMaxNesting)
      return fail(at, "the schema nests deeper than " + std::to_string(JsonSchema::kMaxNesting) + " levels");
    if (s.is_boolean()) {
      if (s.get<bool>()) return &out_.any_;
      return fail(at, "the schema 'false' accepts no value");
    }
    if (!s.is_object()) return fail(at, "a schema must be an object or a boolean");
    for (const auto& [k, v] : s.items())
      if (refused().count(k)) return fail(at, "'" + k + "' is not supported (" + kSupported + ")");
    size_t constraints = 0;  // keywords that shape the value
    for (const auto& [k, v] : s.items()) constraints += understood().count(k);

    if (s.contains("$ref")) {
      if (constraints > 1) return fail(at, "'$ref' beside other constraints is not supported");
      return ref(s["$ref"], at, nesting);
    }
    for (const char* k : {"anyOf", "oneOf", "allOf"}) {
      if (!s.contains(k)) continue;
      if (constraints > 1) return fail(at, std::string("'") + k + "' beside other constraints is not supported");
      const json& list = s[k];
      if (!list.is_array() || list.empty()) return fail(at, std::string("'") + k + "' must be a non-empty array");
      if (std::string(k) == "allOf") {
        if (list.size() != 1) return fail(at, "'allOf' of more than one schema is not supported");
        return compile(list[0], at + "/allOf/0", nesting + 1);
      }
      SchemaNode* n = add(at);
      if (!n) return limit(at);
      n->kind = SchemaNode::Kind::AnyOf;
      for (size_t i = 0; i < list.size(); ++i) {
        auto alt = compile(list[i], at + "/" + k + "/" + std::to_string(i), nesting + 1);
        if (!alt.ok()) return alt.error();
        n->alternatives.push_back(*alt);
      }
      return n;
    }

    std::vector<std::string> types;
    if (s.contains("type")) {
      const json& t = s["type"];
      auto known = [](const json& v) {
        static const std::set<std::string> k = {"object", "array", "string", "number", "integer", "boolean", "null"};
        return v.is_string() && k.count(v.get<std::string>()) > 0;
      };
      if (known(t)) {
        types.push_back(t.get<std::string>());
      } else if (t.is_array() && !t.empty() && std::all_of(t.begin(), t.end(), known)) {
        for (const json& v : t)
          if (std::find(types.begin(), types.end(), v.get<std::string>()) == types.end())
            types.push_back(v.get<std::string>());
      } else {
        return fail(at,
                    "'type' must be one of object, array, string, number, integer, boolean, null, or a list of them");
      }
    }

    const bool numeric =
        std::any_of(types.begin(), types.end(), [](const std::string& t) { return t == "number" || t == "integer"; });
    for (const char* k : kKeywords)
      if (s.contains(k) && (!numeric || s.contains("enum") || s.contains("const")))
        return fail(at, std::string("'") + k +
                            "' is supported with \"type\": \"number\" or \"integer\" (and no enum or const)");
    if (s.contains("enum") || s.contains("const")) return literal(s, types, at);

    if (types.empty()) {  // inferred from the keywords, as schema writers often leave it out
      if (s.contains("properties") || s.contains("additionalProperties") || s.contains("required"))
        types.push_back("object");
      else if (s.contains("items") || s.contains("prefixItems") || s.contains("minItems") || s.contains("maxItems"))
        types.push_back("array");
      else if (s.contains("minLength") || s.contains("maxLength") || s.contains("pattern"))
        types.push_back("string");
      else
        return &out_.any_;
    }
    if (types.size() == 1) return typed(s, types[0], at, nesting);
    SchemaNode* n = add(at);
    if (!n) return limit(at);
    n->kind = SchemaNode::Kind::AnyOf;
    for (const std::string& t : types) {
      auto alt = typed(s, t, at, nesting);
      if (!alt.ok()) return alt.error();
      n->alternatives.push_back(*alt);
    }
    return n;
  }

 private:
  Error fail(const std::string& at, const std::string& what) const {
    return make_error("JSON schema at " + (at.empty() ? std::string("/") : at) + ": " + what);
  }
  Error limit(const std::string& at) const {
    return fail(at, "the schema has more than " + std::to_string(JsonSchema::kMaxNodes) + " parts");
  }
  SchemaNode* add(const std::string& at) {
    if (out_.nodes_.size() >= static_cast<size_t>(JsonSchema::kMaxNodes)) return nullptr;
    return &out_.nodes_.emplace_back();
  }

  // minimum / maximum / exclusive ones / multipleOf, exactly (number_rules.h).
  Result<const SchemaNode*> number_rules(const json& s, SchemaNode* n, const std::string& at) const {
    NumberRules& r = n->numbers;
    const bool integer = n->kind == SchemaNode::Kind::Integer;
    for (const char* k : kKeywords) {
      if (!s.contains(k)) continue;
      const std::string key = k;
      if (!s[k].is_number()) return fail(at, "'" + key + "' must be a number");
      const bool lower = key == "minimum" || key == "exclusiveMinimum";
      bool exact = false;
      const std::optional<Fixed> parsed = parse_fixed(s[k].dump(), lower, &exact);  // dump(): its shortest text
      if (!parsed) return fail(at, "'" + key + "' must be a finite number");
      const Fixed v = *parsed;
      if (key == "minimum") r.min = std::max(r.min, v);
      if (key == "maximum") r.max = std::min(r.max, v);
      if (key == "exclusiveMinimum") r.min = std::max(r.min, exact ? v + 1 : v);
      if (key == "exclusiveMaximum") r.max = std::min(r.max, exact ? v - 1 : v);
      if (key == "multipleOf") {
        if (!(s[k].get<double>() > 0)) return fail(at, "'multipleOf' must be above 0");
        if (!exact || v >= kFixedLimit)
          return fail(at, "'multipleOf' is supported down to 1e-16 and up to 1e32 (a schema number's digits)");
        r.step = v;
      }
    }
    // An integer is a multiple of 1 too: of the least common multiple.
    if (integer && r.any()) {
      const Fixed a = r.step == 0 ? kFixedOne : r.step;
      Fixed x = a, y = kFixedOne;
      while (y != 0) x = std::exchange(y, x % y);                                  // gcd
      r.step = a / x > kFixedLimit / kFixedOne ? kFixedLimit : a / x * kFixedOne;  // past every value but 0
    }
    if (r.any() && !r.reachable(-kFixedLimit + 1, kFixedLimit - 1))
      return fail(at, std::string("no ") + (integer ? "integer" : "number") +
                          " of at most 16 digits a part keeps its minimum, maximum and multipleOf");
    return n;
  }

  // A string's minLength, maxLength and pattern, into n.
  Result<const SchemaNode*> string_rules(const json& s, SchemaNode* n, const std::string& at) {
    SS_ASSIGN_OR_RETURN(n->min_length, count(s, "minLength", 0, at));
    SS_ASSIGN_OR_RETURN(n->max_length, count(s, "maxLength", kNone, at));
    if (n->min_length > n->max_length) return fail(at, "'minLength' is larger than 'maxLength'");
    // A known "format" shapes the string as a pattern would; beside a
    // pattern (or unknown) it stays an annotation.
    std::string pattern;
    if (s.contains("pattern")) {
      if (!s["pattern"].is_string()) return fail(at, "'pattern' must be a string");
      pattern = s["pattern"].get<std::string>();
    } else if (s.contains("format") && s["format"].is_string() && format_pattern(s["format"].get<std::string>())) {
      pattern = format_pattern(s["format"].get<std::string>());
    } else {
      return n;
    }
    auto text = regex_to_gbnf(pattern, RegexMatch::Search);
    if (!text.ok()) return fail(at, "'pattern': " + text.error().message);
    auto grammar = Gbnf::parse(*text);
    if (!grammar.ok()) return fail(at, "'pattern': " + grammar.error().message);
    CharDfa::Limits limits;
    limits.max_entries = std::min(limits.max_entries, budget_.entries);
    limits.max_work = std::min(limits.max_work, budget_.work);
    auto dfa =
        CharDfa::build(*grammar, n->min_length, n->max_length == kNone ? CharDfa::kNoLimit : n->max_length, limits);
    if (!dfa.ok()) return fail(at, "'pattern': " + dfa.error().message);
    budget_.entries -= std::min(budget_.entries, (*dfa)->state_count() * (*dfa)->class_count());
    budget_.work -= std::min(budget_.work, (*dfa)->build_work());
    n->pattern = *dfa;
    return n;
  }

  // Whether JSON string `v` (UTF-8) fits the string rules of n.
  static bool string_fits(const std::string& v, const SchemaNode& n) {
    const size_t chars = utf8_chars(v).size();
    if (chars < n.min_length || chars > n.max_length) return false;
    if (!n.pattern) return true;
    const int32_t state = n.pattern->run(n.pattern->start(), v);
    return state != CharDfa::kDead && n.pattern->accepts(state);
  }

  // minItems / maxItems / minLength / maxLength, `absent` if not given.
  Result<uint32_t> count(const json& s, const char* key, uint32_t absent, const std::string& at) const {
    if (!s.contains(key)) return absent;
    const json& v = s[key];
    if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<int64_t>() >= 0))
      return fail(at, std::string("'") + key + "' must be a non-negative integer");
    return static_cast<uint32_t>(std::min<uint64_t>(v.get<uint64_t>(), std::numeric_limits<uint32_t>::max() - 1));
  }

  Result<const SchemaNode*> literal(const json& s, const std::vector<std::string>& types, const std::string& at) {
    if (s.contains("enum") && s.contains("const")) return fail(at, "'enum' beside 'const' is not supported");
    json values = s.contains("const") ? json::array({s["const"]}) : s["enum"];
    if (!values.is_array() || values.empty()) return fail(at, "'enum' must be a non-empty array");
    if (values.size() > static_cast<size_t>(JsonSchema::kMaxLiterals))
      return fail(at, "'enum' has more than " + std::to_string(JsonSchema::kMaxLiterals) + " values");
    SchemaNode* n = add(at);
    if (!n) return limit(at);
    n->kind = SchemaNode::Kind::Literal;
    // A string value must also keep the string keywords beside the enum.
    SchemaNode rules;
    if (auto made = string_rules(s, &rules, at); !made.ok()) return made.error();
    for (const json& v : values) {
      if (!types.empty() &&
          std::none_of(types.begin(), types.end(), [&](const std::string& t) { return type_matches(v, t); }))
        continue;
      if (v.is_string() && !string_fits(v.get<std::string>(), rules)) continue;
      std::string text = v.dump(-1, ' ', false, json::error_handler_t::replace);
      if (std::find(n->texts.begin(), n->texts.end(), text) == n->texts.end()) n->texts.push_back(std::move(text));
    }
    if (n->texts.empty())
      return fail(at, "no value of 'enum' / 'const' has the schema's 'type' (and its string keywords)");
    return n;
  }

  Result<const SchemaNode*> typed(const json& s, const std::string& type, const std::string& at, int nesting) {
    if (type == "boolean" || type == "null") {
      SchemaNode* n = add(at);
      if (!n) return limit(at);
      n->kind = SchemaNode::Kind::Literal;
      n->texts = type == "null" ? std::vector<std::string>{"null"} : std::vector<std::string>{"true", "false"};
      return n;
    }
    SchemaNode* n = add(at);
    if (!n) return limit(at);
    if (type == "number" || type == "integer") {
      n->kind = type == "number" ? SchemaNode::Kind::Number : SchemaNode::Kind::Integer;
      n->bounded_digits = true;
      return number_rules(s, n, at);
    }
    if (type == "string") {
      n->kind = SchemaNode::Kind::String;
      return string_rules(s, n, at);
    }
    if (type == "array") {
      n->kind = SchemaNode::Kind::Array;
      SS_ASSIGN_OR_RETURN(n->min_items, count(s, "minItems", 0, at));
      SS_ASSIGN_OR_RETURN(n->max_items, count(s, "maxItems", kNone, at));
      if (n->min_items > n->max_items) return fail(at, "'minItems' is larger than 'maxItems'");
      // prefixItems (a tuple: pydantic's Tuple[int, str]) for the first
      // items, `items` for the rest.
      if (s.contains("prefixItems")) {
        const json& p = s["prefixItems"];
        if (!p.is_array()) return fail(at, "'prefixItems' must be an array of schemas");
        if (p.size() > static_cast<size_t>(JsonSchema::kMaxProperties))
          return fail(at, "more than " + std::to_string(JsonSchema::kMaxProperties) + " 'prefixItems'");
        for (size_t i = 0; i < p.size(); ++i) {
          SS_ASSIGN_OR_RETURN(const SchemaNode* item,
                              compile(p[i], at + "/prefixItems/" + std::to_string(i), nesting + 1));
          n->prefix_items.push_back(item);
        }
      }
      const auto fixed = static_cast<uint32_t>(n->prefix_items.size());
      if (!s.contains("items")) {
        n->items = &out_.any_;
      } else if (s["items"].is_boolean() && !s["items"].get<bool>()) {
        if (n->min_items > fixed)
          return fail(at, "'items' false with 'minItems' above the 'prefixItems' count accepts no value");
        n->max_items = std::min(n->max_items, fixed);
      } else {
        SS_ASSIGN_OR_RETURN(n->items, compile(s["items"], at + "/items", nesting + 1));
      }
      return n;
    }
    // object
    n->kind = SchemaNode::Kind::Object;
    if (s.contains("properties")) {
      const json& props = s["properties"];
      if (!props.is_object()) return fail(at, "'properties' must be an object");
      if (props.size() > static_cast<size_t>(JsonSchema::kMaxProperties))
        return fail(at, "more than " + std::to_string(JsonSchema::kMaxProperties) + " properties");
      for (const auto& [name, sub] : props.items()) {
        SchemaNode::Property p;
        p.key = key_text(name);
        SS_ASSIGN_OR_RETURN(p.node, compile(sub, at + "/properties/" + name, nesting + 1));
        n->properties.push_back(std::move(p));
      }
    }
    if (!s.contains("additionalProperties")) {
      n->additional = s.contains("properties") ? nullptr : &out_.any_;
    } else if (const json& a = s["additionalProperties"]; a.is_boolean()) {
      n->additional = a.get<bool>() ? &out_.any_ : nullptr;
    } else {
      SS_ASSIGN_OR_RETURN(n->additional, compile(a, at + "/additionalProperties", nesting + 1));
    }
    if (s.contains("required")) {
      const json& req = s["required"];
      if (!req.is_array()) return fail(at, "'required' must be an array of names");
      for (const json& r : req) {
        if (!r.is_string()) return fail(at, "'required' must be an array of names");
        const std::string key = key_text(r.get<std::string>());
        auto it = std::find_if(n->properties.begin(), n->properties.end(),
                               [&](const SchemaNode::Property& p) { return p.key == key; });
        if (it == n->properties.end()) {  // a required key the properties do not describe
          if (!n->additional)
            return fail(at, "required '" + r.get<std::string>() +
                                "' is neither a property nor allowed by 'additionalProperties'");
          if (n->properties.size() >= static_cast<size_t>(JsonSchema::kMaxProperties))
            return fail(at, "more than " + std::to_string(JsonSchema::kMaxProperties) + " properties");
          n->properties.push_back({key, n->additional});
          it = n->properties.end() - 1;
        }
        n->required |= uint64_t{1} << (it - n->properties.begin());
      }
    }
    return n;
  }

  // A key as the model writes it between quotes: JSON's escaping, as json::dump.
  static std::string key_text(const std::string& name) {
    const std::string quoted = json(name).dump(-1, ' ', false, json::error_handler_t::replace);
    return quoted.substr(1, quoted.size() - 2);
  }

  // "#", "#/$defs/X", "#/definitions/X", any JSON pointer into the document.
  Result<const SchemaNode*> ref(const json& r, const std::string& at, int nesting) {
    if (!r.is_string()) return fail(at, "'$ref' must be a string");
    const std::string path = r.get<std::string>();
    if (path.empty() || path[0] != '#') return fail(at, "'$ref' must point into this schema ('#/$defs/...')");
    if (auto it = refs_.find(path); it != refs_.end()) return static_cast<const SchemaNode*>(it->second);
    const json* target = nullptr;
    try {
      target = &doc_.at(json::json_pointer(path.substr(1)));
    } catch (const json::exception&) {
      return fail(at, "'$ref' '" + path + "' points at nothing in the schema");
    }
    SchemaNode* n = add(at);
    if (!n) return limit(at);
    refs_[path] = n;
    resolving_.insert(n);
    auto body = compile(*target, path.substr(1), nesting + 1);
    if (!body.ok()) return body.error();
    // A body that is itself a reference still being resolved: a cycle of
    // references with no value in between (legal recursion nests a property,
    // an item or an alternative first).
    if (resolving_.count(*body)) return fail(at, "'$ref' '" + path + "' refers to itself without a value in between");
    *n = **body;  // the placeholder becomes the target (references to it were taken during compile)
    resolving_.erase(n);
    return static_cast<const SchemaNode*>(n);
  }

  const json& doc_;
  JsonSchema& out_;
  JsonSchema::PatternBudget& budget_;        // for the pattern automata still to build
  std::map<std::string, SchemaNode*> refs_;  // $ref path -> its node
  std::set<const SchemaNode*> resolving_;    // placeholders whose body is being compiled
};

namespace {
// The readings a value of n opens (anyOf followed as the recognizer does),
// counted up to just past `cap`.
int alternatives(const SchemaNode* n, int depth, int cap) {
  if (n->kind != SchemaNode::Kind::AnyOf) return 1;
  if (depth >= JsonSchema::kMaxAnyOfDepth) return 0;
  int sum = 0;
  for (const SchemaNode* alt : n->alternatives) {
    sum += alternatives(alt, depth + 1, cap - sum);
    if (sum > cap) break;
  }
  return sum;
}
}  // namespace

Result<std::shared_ptr<const JsonSchema>> JsonSchema::compile(const json& schema) {
  PatternBudget budget;
  return compile(schema, budget);
}

Result<std::shared_ptr<const JsonSchema>> JsonSchema::compile(const json& schema, PatternBudget& budget) {
  auto out = std::make_shared<JsonSchema>();
  SchemaCompiler c(schema, *out, budget);
  auto root = c.compile(schema, "", 0);
  if (!root.ok()) return root.error();
  for (const SchemaNode& n : out->nodes_)
    if (alternatives(&n, 0, kMaxAlternatives) > kMaxAlternatives)
      return make_error("JSON schema: its anyOf / oneOf / type lists open more than " +
                        std::to_string(kMaxAlternatives) + " alternatives at one value");
  out->root_ = *root;
  return std::shared_ptr<const JsonSchema>(std::move(out));
}

}  // namespace ss
