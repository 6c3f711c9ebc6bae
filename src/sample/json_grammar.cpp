#include "sample/json_grammar.h"

#include <limits>

namespace ss {

namespace {

bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_hex(char c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

}  // namespace

bool JsonGrammar::feed(std::string_view bytes) {
  JsonGrammar next = *this;
  for (char c : bytes)
    if (!next.step(c)) return false;
  *this = std::move(next);
  return true;
}

size_t JsonGrammar::mask(std::span<const std::string> token_bytes, std::span<float> logits) const {
  size_t allowed = 0;
  for (size_t id = 0; id < token_bytes.size() && id < logits.size(); ++id) {
    const std::string& b = token_bytes[id];
    bool ok = !b.empty();
    if (ok) {
      JsonGrammar g = *this;
      for (char c : b)
        if (!(ok = g.step(c))) break;
    }
    if (ok)
      ++allowed;
    else
      logits[id] = -std::numeric_limits<float>::infinity();
  }
  for (size_t id = token_bytes.size(); id < logits.size(); ++id) logits[id] = -std::numeric_limits<float>::infinity();
  return allowed;
}

bool JsonGrammar::value_start(char c) {
  switch (c) {
    case '{':
    case '[':
      if (static_cast<int>(stack_.size()) >= kMaxDepth) return false;
      stack_.push_back(c);
      state_ = c == '{' ? State::ObjectFirst : State::ArrayFirst;
      return true;
    case '"':
      key_ = false;
      state_ = State::String;
      return true;
    case '-':
      state_ = State::Minus;
      return true;
    case '0':
      state_ = State::Zero;
      return true;
    case 't':
      literal_ = "rue";
      state_ = State::Literal;
      return true;
    case 'f':
      literal_ = "alse";
      state_ = State::Literal;
      return true;
    case 'n':
      literal_ = "ull";
      state_ = State::Literal;
      return true;
    default:
      if (c >= '1' && c <= '9') {
        state_ = State::Int;
        return true;
      }
      return false;
  }
}

// A value ended inside its container (the top level is always an object).
bool JsonGrammar::after_value(char c) {
  const char top = stack_.back();
  if (c == ',') {
    state_ = top == '{' ? State::Key : State::Value;
    return true;
  }
  if ((c == '}' && top == '{') || (c == ']' && top == '[')) {
    stack_.pop_back();
    state_ = stack_.empty() ? State::Done : State::AfterValue;
    return true;
  }
  return false;
}

bool JsonGrammar::end_value(char c) {
  state_ = State::AfterValue;
  return space(c) || after_value(c);
}

bool JsonGrammar::space(char c) {
  if (!is_ws(c) || ws_run_ >= kMaxWhitespace) return false;
  ++ws_run_;
  return true;
}

bool JsonGrammar::step(char c) {
  if (!is_ws(c)) ws_run_ = 0;
  switch (state_) {
    case State::Start:
      if (space(c)) return true;
      if (c != '{') return false;
      stack_.push_back('{');
      state_ = State::ObjectFirst;
      return true;
    case State::Done:
      return space(c);
    case State::Value:
      return space(c) || value_start(c);
    case State::ArrayFirst:
      if (space(c)) return true;
      if (c == ']') return after_value(c);
      return value_start(c);
    case State::ObjectFirst:
      if (space(c)) return true;
      if (c == '}') return after_value(c);
      [[fallthrough]];
    case State::Key:
      if (space(c)) return true;
      if (c != '"') return false;
      key_ = true;
      state_ = State::String;
      return true;
    case State::Colon:
      if (space(c)) return true;
      if (c != ':') return false;
      state_ = State::Value;
      return true;
    case State::AfterValue:
      return space(c) || after_value(c);
    case State::String:
      if (c == '"') {
        state_ = key_ ? State::Colon : State::AfterValue;
        return true;
      }
      if (c == '\\') {
        state_ = State::Escape;
        return true;
      }
      return static_cast<unsigned char>(c) >= 0x20;
    case State::Escape:
      if (c == 'u') {
        hex_left_ = 4;
        state_ = State::Hex;
        return true;
      }
      if (c == '"' || c == '\\' || c == '/' || c == 'b' || c == 'f' || c == 'n' || c == 'r' || c == 't') {
        state_ = State::String;
        return true;
      }
      return false;
    case State::Hex:
      if (!is_hex(c)) return false;
      if (--hex_left_ == 0) state_ = State::String;
      return true;
    case State::Minus:
      if (c == '0') {
        state_ = State::Zero;
        return true;
      }
      if (is_digit(c)) {
        state_ = State::Int;
        return true;
      }
      return false;
    case State::Zero:
    case State::Int:
      if (state_ == State::Int && is_digit(c)) return true;
      if (c == '.') {
        state_ = State::Dot;
        return true;
      }
      if (c == 'e' || c == 'E') {
        state_ = State::Exp;
        return true;
      }
      return end_value(c);
    case State::Dot:
      if (!is_digit(c)) return false;
      state_ = State::Frac;
      return true;
    case State::Frac:
      if (is_digit(c)) return true;
      if (c == 'e' || c == 'E') {
        state_ = State::Exp;
        return true;
      }
      return end_value(c);
    case State::Exp:
      if (c == '+' || c == '-') {
        state_ = State::ExpSign;
        return true;
      }
      [[fallthrough]];
    case State::ExpSign:
      if (!is_digit(c)) return false;
      state_ = State::ExpDigits;
      return true;
    case State::ExpDigits:
      return is_digit(c) || end_value(c);
    case State::Literal:
      if (c != *literal_) return false;
      if (*++literal_ == '\0') state_ = State::AfterValue;
      return true;
  }
  return false;
}

}  // namespace ss
