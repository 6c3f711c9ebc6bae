#pragma once
// JSON mode (OpenAI's response_format {"type": "json_object"}): a byte-level
// pushdown recognizer for JSON text whose top level is an object, used to
// mask every token whose bytes would make the answer so far no longer the
// prefix of such a text. RFC 8259's grammar, with a nesting limit; strings
// take any bytes >= 0x80 (the detokenizer's UTF-8 rules apply as to any
// answer) but no control characters, and escapes as the RFC lists them.
// Whitespace between tokens comes in runs of at most kMaxWhitespace bytes
// (llama.cpp's JSON grammars bound it too): a weak model otherwise prefers
// blank lines for ever to committing to structure.
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ss {

class JsonGrammar {
 public:
  static constexpr int kMaxDepth = 32;
  static constexpr int kMaxWhitespace = 20;

  // False (and the state is unchanged) if `bytes` cannot continue the text.
  bool feed(std::string_view bytes);
  // The top-level object is closed: the answer is a whole JSON text.
  bool complete() const { return state_ == State::Done; }

  // Sets logits[id] to -inf for every token whose bytes (token_bytes[id])
  // cannot come next: tokens without bytes too, as they would not advance
  // the text. Returns how many tokens stay allowed.
  size_t mask(std::span<const std::string> token_bytes, std::span<float> logits) const;

 private:
  enum class State : uint8_t {
    Start,        // before the top-level object (whitespace allowed)
    Value,        // a value must start (after ':' or ',' in an array)
    ArrayFirst,   // after '[': a value or ']'
    ObjectFirst,  // after '{': a key or '}'
    Key,          // after ',' in an object: a key
    Colon,        // after a key
    AfterValue,   // after a value inside a container: ',' or the closer
    String,       // inside a string (key_ says which kind)
    Escape,       // after '\'
    Hex,          // inside \uXXXX (hex_left digits to go)
    Minus,        // number: after '-'
    Zero,         // number: a leading 0
    Int,          // number: integer digits
    Dot,          // number: after '.'
    Frac,         // number: fraction digits
    Exp,          // number: after 'e'
    ExpSign,      // number: after the exponent's sign
    ExpDigits,    // number: exponent digits
    Literal,      // inside true / false / null
    Done,         // the top-level object closed (whitespace allowed)
  };
  bool step(char c);
  bool space(char c);  // c is whitespace and the run may grow
  bool value_start(char c);
  bool end_value(char c);  // a number ended at c: c goes to the container
  bool after_value(char c);

  State state_ = State::Start;
  std::string stack_;  // '{' or '[' per open container
  bool key_ = false;   // the string being read is an object key
  uint8_t hex_left_ = 0;
  uint8_t ws_run_ = 0;             // whitespace bytes in a row outside strings
  const char* literal_ = nullptr;  // the rest of true/false/null to match
};

}  // namespace ss
