#pragma once
// A JSON schema (OpenAI's response_format {"type": "json_schema"}, llama.cpp's
// "json_schema") compiled into the graph the JSON recognizer walks
// (json_grammar.h). The subset is what structured-output clients send
// (OpenAI strict schemas, pydantic's model_json_schema()): type (one or a
// list), properties, required, additionalProperties, items, prefixItems, minItems,
// maxItems, minLength, maxLength, pattern (ECMAScript, as regex_to_gbnf.h
// reads it; found anywhere in the string unless anchored with ^ and $),
// minimum / maximum / exclusiveMinimum / exclusiveMaximum / multipleOf on
// numbers and integers (exact decimals: number_rules.h), enum, const, anyOf,
// oneOf (read as anyOf: exclusivity is not checked), allOf of one schema,
// $ref into $defs / definitions / the root (recursion allowed), format for
// the formats string_formats.h knows (as a pattern; beside one, or unknown,
// an annotation). Annotations (title, description, default, examples, ...)
// are ignored. Constraint keywords outside the
// subset (not, uniqueItems, prefixItems, ...) are errors, never ignored: a
// client must not trust output that a constraint it sent did not shape.
//
// As llama.cpp's schema grammars do, an object schema with "properties" and
// no "additionalProperties" takes no other keys, and numbers read from a
// schema have at most 16 digits in each part (weak models otherwise write
// digits for ever).
#include <cstdint>
#include <deque>
#include <limits>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "sample/char_dfa.h"
#include "sample/number_rules.h"
#include "util/result.h"

namespace ss {

struct SchemaNode {
  enum class Kind : uint8_t {
    Any,      // any JSON value
    Object,   // properties, additional
    Array,    // items, min_items, max_items
    String,   // min_length, max_length (characters: a code point or an escape each), pattern
    Number,   // digits bounded if bounded_digits
    Integer,  // no fraction or exponent
    Literal,  // one of texts (enum, const, boolean, null)
    AnyOf,    // one of alternatives
  };
  struct Property {
    std::string key;  // the name as written between the key's quotes (JSON-escaped)
    const SchemaNode* node = nullptr;
  };

  Kind kind = Kind::Any;
  std::vector<Property> properties;
  uint64_t required = 0;                        // bit i: properties[i] must be present
  const SchemaNode* additional = nullptr;       // other keys' values; nullptr: no other keys
  std::vector<const SchemaNode*> prefix_items;  // the first items' schemas (prefixItems)
  const SchemaNode* items = nullptr;            // the others'; nullptr: no others (max_items says so)
  uint32_t min_items = 0, max_items = std::numeric_limits<uint32_t>::max();
  uint32_t min_length = 0, max_length = std::numeric_limits<uint32_t>::max();
  // String: "pattern" with the lengths folded in (the characters the string
  // stands for, escapes decoded); null: none.
  std::shared_ptr<const CharDfa> pattern;
  bool bounded_digits = false;
  // Number / Integer: minimum / maximum (exclusive ones made inclusive) and
  // multipleOf (an integer's a multiple of 1 too); a number with rules is
  // written without an exponent.
  NumberRules numbers;
  std::vector<std::string> texts;  // compact JSON texts, distinct
  std::vector<const SchemaNode*> alternatives;
};

class JsonSchema {
 public:
  static constexpr int kMaxProperties = 64;  // per object (a bit mask each)
  static constexpr int kMaxLiterals = 64;    // per enum
  static constexpr int kMaxNodes = 4096;
  static constexpr int kMaxNesting = 64;  // schema objects inside each other
  // anyOf inside anyOf (through $ref too) that the recognizer follows at one
  // value, and the most readings one value may open that way: the mask tries
  // each for every token, on the thread that schedules all requests.
  static constexpr int kMaxAnyOfDepth = 8;
  static constexpr int kMaxAlternatives = 64;
  // All the schema's pattern automata together (char_dfa.h): their
  // transitions, and the work building them takes (CharDfa::Limits).
  static constexpr size_t kMaxPatternEntries = size_t{1} << 18;
  static constexpr size_t kMaxPatternWork = size_t{1} << 23;

  // What building pattern automata may still take: one budget can span the
  // schemas of one request (a chat's tools), so no request buys more.
  struct PatternBudget {
    size_t entries = kMaxPatternEntries;
    size_t work = kMaxPatternWork;
  };

  // Errors name the keyword and where it is ("at /properties/age: ...").
  static Result<std::shared_ptr<const JsonSchema>> compile(const nlohmann::json& schema);
  static Result<std::shared_ptr<const JsonSchema>> compile(const nlohmann::json& schema, PatternBudget& budget);
  // JSON mode: any object.
  static std::shared_ptr<const JsonSchema> any_object();

  const SchemaNode* root() const { return root_; }
  // What an Any node's value becomes once its first byte is read.
  const SchemaNode* any_object_node() const { return &any_object_; }
  const SchemaNode* any_array_node() const { return &any_array_; }
  const SchemaNode* any_string_node() const { return &any_string_; }
  const SchemaNode* any_number_node() const { return &any_number_; }
  const SchemaNode* any_literal_node() const { return &any_literal_; }

  JsonSchema();
  JsonSchema(const JsonSchema&) = delete;
  JsonSchema& operator=(const JsonSchema&) = delete;

 private:
  friend class SchemaCompiler;
  std::deque<SchemaNode> nodes_;  // stable addresses
  SchemaNode any_, any_object_, any_array_, any_string_, any_number_, any_literal_;
  const SchemaNode* root_ = nullptr;
};

}  // namespace ss
