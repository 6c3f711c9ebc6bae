#pragma once
// Structured output: a byte-level recognizer for JSON texts that a schema
// (json_schema.h) accepts, used to mask every token whose bytes would make
// the answer so far no longer the prefix of such a text. JSON mode (OpenAI's
// response_format {"type": "json_object"}) is the schema "any object".
//
// RFC 8259's grammar, with a nesting limit; strings (keys too) hold valid
// UTF-8 (RFC 3629: a byte-fallback token cannot leave a broken character,
// which the detokenizer would show as U+FFFD) and no control characters,
// and escapes as the RFC lists them. Whitespace between tokens
// is llama.cpp's schema grammars' `space`: none, one ' ', or one or two
// '\n' and then at most kMaxWhitespace spaces or tabs (pretty-printed JSON
// fits it): a weak model otherwise prefers blank lines for ever to
// committing to structure. Where a schema leaves the reading open (anyOf,
// a list of types), every reading still possible is followed side by side,
// up to kMaxReadings (more are dropped: the mask may then refuse a byte a
// dropped reading would take, but never allows one that no schema reading
// takes).
#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sample/json_schema.h"

namespace ss {

class JsonGrammar {
 public:
  static constexpr int kMaxDepth = 32;  // open objects and arrays
  static constexpr int kMaxWhitespace = 20;
  static constexpr int kMaxReadings = JsonSchema::kMaxAlternatives;

  JsonGrammar();  // JSON mode: any object
  explicit JsonGrammar(std::shared_ptr<const JsonSchema> schema);
  JsonGrammar(const JsonGrammar& o) : schema_(o.schema_) { copy_from(o); }
  JsonGrammar& operator=(const JsonGrammar& o) {
    schema_ = o.schema_;
    copy_from(o);
    return *this;
  }

  // False (and the state is unchanged) if `bytes` cannot continue the text.
  bool feed(std::string_view bytes);
  // The value is closed in every reading: nothing but whitespace may follow.
  bool complete() const;
  // The text so far is a whole value in some reading (a number at the top
  // level may still grow): the answer may end here.
  bool can_end() const;

  // Sets logits[id] to -inf for every token whose bytes (token_bytes[id])
  // cannot come next: tokens without bytes too, as they would not advance
  // the text. Returns how many tokens stay allowed.
  size_t mask(std::span<const std::string> token_bytes, std::span<float> logits) const;
  // As above; the end-of-generation tokens `ends` keep their logits where
  // the answer may end here (can_end(): a whole top-level number, say).
  size_t mask(std::span<const std::string> token_bytes, std::span<float> logits, std::span<const int32_t> ends) const;

 private:
  enum class Kind : uint8_t { Root, Object, Array, String, Number, Literal };
  // Object: where in a member; the key's own string state is in `str`.
  enum ObjectAt : uint8_t { kFirst, kKeyNext, kInKey, kColon, kValue, kAfter };
  enum ArrayAt : uint8_t { kArrFirst, kArrValue, kArrAfter };
  enum RootAt : uint8_t { kBefore, kDone };
  // Number parts, as RFC 8259's number grammar.
  enum NumberAt : uint8_t { kMinus, kZero, kInt, kDot, kFrac, kExp, kExpSign, kExpDigits };
  // Where a run of whitespace is: " " | "\n"{1,2} [ \t]{0,20}.
  enum WsAt : uint8_t { kWsNone, kWsSpace, kWsNewline, kWsTwoNewlines, kWsIndent };
  // A string's (or key's) escape state.
  enum StrAt : uint8_t { kBody, kEscape, kHex1, kHex2, kHex3, kHex4 };

  // Trivial (no member initializers), so the scratch readings anyOf needs
  // cost nothing to declare; new frames are value-initialized (Frame{}).
  struct Frame {
    const SchemaNode* node;
    uint64_t seen;   // Object: properties present; Number: the integer part's magnitude so far;
                     // String with a pattern: the character being decoded
    uint64_t cand;   // Object key / Literal: the texts still matching; Number: 1 if negative;
                     // String with a pattern: its automaton's state
    uint64_t frac;   // Number with rules: the fraction's digits as an integer
    uint32_t count;  // Array: items; String: characters; Number: digits in this part
    uint32_t pos;    // Object key / Literal: bytes matched
    Kind kind;
    uint8_t at;            // ObjectAt / ArrayAt / RootAt / NumberAt
    uint8_t str;           // String and Object keys: StrAt (kBody = 0)
    int8_t prop;           // Object: the property whose value is read (-1: another key)
    uint8_t u8_left;       // String / key: continuation bytes the character still needs
    uint8_t u8_lo, u8_hi;  // the range the next of them must be in
  };
  static constexpr int kMaxFrames = kMaxDepth + 2;  // the root, containers, one scalar
  struct Reading {
    uint8_t depth = 0;
    uint8_t ws = kWsNone;   // the whitespace run outside strings so far
    uint8_t ws_indent = 0;  // its spaces and tabs after the newlines
    std::array<Frame, kMaxFrames> f;
    Frame& top() { return f[depth - 1]; }
    const Frame& top() const { return f[depth - 1]; }
  };

  enum class StrByte { Bad, Closes, Char, Cont };  // Char: a character starts (counted for lengths)
  static StrByte string_byte(Frame& t, char c);
  static bool plain_text(const std::string& b, uint32_t& chars);
  // Steps a pattern string's automaton once byte c completes a character;
  // `was` and `left`: the string's escape state and UTF-8 bytes to come before c.
  static bool pattern_byte(Frame& t, char c, uint8_t was, uint8_t left);
  void copy_from(const JsonGrammar& o);
  static void copy_reading(Reading& to, const Reading& from);
  bool step_all(char c);
  bool step(Reading& r, char c);
  bool space(Reading& r, char c) const;
  bool start_value(Reading& r, const SchemaNode* n, char c, int alias_depth);
  bool push(Reading& r, const Frame& f) const;
  bool value_done(Reading& r) const;
  bool object_step(Reading& r, char c);
  bool array_step(Reading& r, char c);
  bool number_step(Reading& r, char c);
  bool literal_step(Reading& r, char c);
  bool literal_advanced(Reading& r) const;
  static bool number_may_end(const Frame& f);
  static bool in_range(const Frame& f);
  static bool range_reachable(const Frame& f);
  static Fixed number_magnitude(const Frame& f);  // units; the sign is in `cand`
  // Whether plain text `b` (`chars` characters) may continue the string or
  // key on top of a reading.
  static bool text_takes(const Frame& t, const std::string& b, uint32_t chars);

  std::shared_ptr<const JsonSchema> schema_;
  std::vector<Reading> readings_;  // every reading of the text so far
  std::vector<Reading> forks_;     // readings a step opened (anyOf), kept after it
};

}  // namespace ss
