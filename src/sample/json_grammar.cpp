#include "sample/json_grammar.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "util/hex.h"
#include "util/utf8.h"

namespace ss {

namespace {

constexpr uint32_t kMaxSchemaDigits = 16;  // per number part, as llama.cpp's schema grammars

bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
uint64_t bit(int i) { return uint64_t{1} << i; }
uint64_t first_bits(size_t n) { return n >= 64 ? ~uint64_t{0} : bit(static_cast<int>(n)) - 1; }

}  // namespace

JsonGrammar::JsonGrammar() : JsonGrammar(JsonSchema::any_object()) {}

JsonGrammar::JsonGrammar(std::shared_ptr<const JsonSchema> schema) : schema_(std::move(schema)) {
  readings_.reserve(kMaxReadings);
  Reading& r = readings_.emplace_back();
  r.depth = 1;
  r.f[0] = Frame{};
  r.f[0].node = schema_->root();
  r.f[0].kind = Kind::Root;
  r.f[0].at = kBefore;
}

void JsonGrammar::copy_reading(Reading& to, const Reading& from) {
  to.depth = from.depth;
  to.ws = from.ws;
  to.ws_indent = from.ws_indent;
  std::copy_n(from.f.begin(), from.depth, to.f.begin());
}

void JsonGrammar::copy_from(const JsonGrammar& o) {
  if (readings_.size() > o.readings_.size()) readings_.resize(o.readings_.size());
  while (readings_.size() < o.readings_.size()) readings_.emplace_back();
  for (size_t i = 0; i < o.readings_.size(); ++i) copy_reading(readings_[i], o.readings_[i]);
  forks_.clear();
}

bool JsonGrammar::feed(std::string_view bytes) {
  JsonGrammar next = *this;
  for (char c : bytes)
    if (!next.step_all(c)) return false;
  copy_from(next);
  return true;
}

bool JsonGrammar::complete() const {
  for (const Reading& r : readings_)
    if (r.depth != 1 || r.f[0].at != kDone) return false;
  return !readings_.empty();
}

bool JsonGrammar::number_may_end(const Frame& f) {
  return (f.at == kZero || f.at == kInt || f.at == kFrac || f.at == kExpDigits) && in_range(f);
}

Fixed JsonGrammar::number_magnitude(const Frame& f) {
  Fixed v = static_cast<Fixed>(f.seen) * kFixedOne;
  if (f.at == kFrac) v += static_cast<Fixed>(f.frac) * pow10_fixed(kFixedDigits - static_cast<int>(f.count));
  return v;
}

// A number that ends here keeps its schema's rules.
bool JsonGrammar::in_range(const Frame& f) {
  const NumberRules& rules = f.node->numbers;
  const Fixed v = number_magnitude(f);
  return !rules.any() || rules.allows(f.cand ? -v : v);
}

// Whether some number the text so far can still grow into keeps the rules:
// the magnitudes it can become are a few intervals (in units), one for each
// count of integer digits still to come (16 at most), each with any fraction.
bool JsonGrammar::range_reachable(const Frame& f) {
  const NumberRules& rules = f.node->numbers;
  if (!rules.any()) return true;
  auto hits = [&](Fixed lo, Fixed hi) { return f.cand ? rules.reachable(-hi, -lo) : rules.reachable(lo, hi); };
  const Fixed d = static_cast<Fixed>(f.seen);
  switch (f.at) {
    case kMinus:  // "-0", or any digits
      return hits(0, kFixedLimit - 1);
    case kZero:
    case kDot:
      return hits(d * kFixedOne, (d + 1) * kFixedOne - 1);
    case kFrac: {
      const Fixed v = number_magnitude(f);
      return hits(v, v + pow10_fixed(kFixedDigits - static_cast<int>(f.count)) - 1);
    }
    case kInt: {
      Fixed p = kFixedOne;
      for (uint32_t k = f.count; k <= kMaxSchemaDigits; ++k, p *= 10)
        if (hits(d * p, (d + 1) * p - 1)) return true;
      return false;
    }
    default:
      return true;  // exponents: only numbers without rules have them
  }
}

bool JsonGrammar::can_end() const {
  for (const Reading& r : readings_) {
    if (r.depth == 1 && r.f[0].at == kDone) return true;
    if (r.depth != 2) continue;
    const Frame& t = r.f[1];
    if (t.kind == Kind::Number && number_may_end(t)) return true;
    if (t.kind == Kind::Literal)
      for (size_t i = 0; i < t.node->texts.size(); ++i)
        if ((t.cand & bit(static_cast<int>(i))) && t.node->texts[i].size() == t.pos) return true;
  }
  return false;
}

// One byte of a string's body after the opening quote. Strings hold valid
// UTF-8 (RFC 3629's ranges: no overlong forms, surrogates or code points
// past U+10FFFF), so an answer's text is exactly its bytes and lengths count
// what a client counts.
JsonGrammar::StrByte JsonGrammar::string_byte(Frame& t, char c) {
  const auto u = static_cast<unsigned char>(c);
  if (t.u8_left > 0) {  // inside a multi-byte character
    if (u < t.u8_lo || u > t.u8_hi) return StrByte::Bad;
    t.u8_lo = 0x80;
    t.u8_hi = 0xBF;
    --t.u8_left;
    return StrByte::Cont;
  }
  switch (t.str) {
    case kBody:
      if (c == '"') return StrByte::Closes;
      if (c == '\\') {
        t.str = kEscape;
        return StrByte::Char;
      }
      if (u < 0x20) return StrByte::Bad;
      if (u < 0x80) return StrByte::Char;
      {
        const Utf8Lead lead = utf8_lead(u);
        if (lead.follow < 1) return StrByte::Bad;  // a continuation byte alone, C0/C1, F5-FF
        t.u8_left = static_cast<uint8_t>(lead.follow);
        t.u8_lo = lead.lo;
        t.u8_hi = lead.hi;
      }
      return StrByte::Char;
    case kEscape:
      if (c == 'u') {
        t.str = kHex1;
        return StrByte::Cont;
      }
      if (c != '\0' && std::strchr("\"\\/bfnrt", c)) {
        t.str = kBody;
        return StrByte::Cont;
      }
      return StrByte::Bad;
    default:  // one of the four digits of \uXXXX
      if (hex_value(c) < 0) return StrByte::Bad;
      t.str = t.str == kHex4 ? static_cast<uint8_t>(kBody) : static_cast<uint8_t>(t.str + 1);
      return StrByte::Cont;
  }
}

// A character only partly written (UTF-8 bytes or \uXXXX digits to come)
// must still be able to become one the automaton takes: some string that
// matches must stay writable.
bool JsonGrammar::pattern_byte(Frame& t, char c, uint8_t was, uint8_t left) {
  const CharDfa& dfa = *t.node->pattern;
  const auto state = static_cast<int32_t>(t.cand);
  const auto u = static_cast<unsigned char>(c);
  uint32_t cp = u;
  if (left > 0 || (was == kBody && u >= 0x80)) {  // UTF-8: string_byte has set what the next byte may be
    t.seen = left > 0 ? (t.seen << 6) | (u & 0x3Fu) : utf8_lead(u).bits;
    if (t.u8_left > 0) {
      const auto [lo, hi] = utf8_partial_range(static_cast<uint32_t>(t.seen), t.u8_left, t.u8_lo, t.u8_hi);
      return dfa.any_in(state, lo, hi);
    }
    cp = static_cast<uint32_t>(t.seen);
  } else if (was == kBody) {
    if (c == '\\') return dfa.any_in(state, 0, 0xFFFF);  // an escape writes a character of the BMP
  } else if (was == kEscape) {
    if (c == 'u') {
      t.seen = 0;
      return dfa.any_in(state, 0, 0xFFFF);
    }
    cp = c == 'b' ? '\b' : c == 'f' ? '\f' : c == 'n' ? '\n' : c == 'r' ? '\r' : c == 't' ? '\t' : u;
  } else {  // a digit of \uXXXX; kHex1 before the first
    t.seen = t.seen * 16 + static_cast<uint64_t>(hex_value(c));
    const int rest = 4 * (kHex4 - was);  // bits of the digits to come
    if (rest > 0)
      return dfa.any_in(state, static_cast<uint32_t>(t.seen << rest),
                        static_cast<uint32_t>(((t.seen + 1) << rest) - 1));
    // A surrogate pair's halves are not followed (the automaton reads whole
    // code points, and holds surrogates in no state); the character itself
    // may be written as UTF-8.
    cp = static_cast<uint32_t>(t.seen);
  }
  const int32_t next = dfa.step(state, cp);
  t.cand = static_cast<uint64_t>(next);
  return next != CharDfa::kDead;
}

// Bytes that stay inside a string body as they are: no quote, backslash or
// control byte, and whole UTF-8 characters; `chars`: how many.
bool JsonGrammar::plain_text(const std::string& b, uint32_t& chars) {
  Frame t{};  // a string body, between characters
  chars = 0;
  for (char c : b) {
    if (c == '"' || c == '\\') return false;
    const StrByte k = string_byte(t, c);
    if (k == StrByte::Bad) return false;
    chars += k == StrByte::Char;
  }
  return t.u8_left == 0;
}

size_t JsonGrammar::mask(std::span<const std::string> token_bytes, std::span<float> logits) const {
  size_t allowed = 0;
  JsonGrammar g = *this;  // scratch: each token starts from a copy of this state
  // Whether each first byte can come next, learned on first sight: most
  // tokens fail there, and need no copy of the state to know it.
  std::array<int8_t, 256> first;
  first.fill(-1);
  // Inside a string or a key in every reading, a token of plain characters
  // (no quote, backslash or control byte) stays there: a string only needs
  // room for its length, a key a property name it begins (any, where other
  // keys are allowed). Deciding so is what stepping it would decide.
  bool in_text = true;
  for (const Reading& r : readings_) {
    const Frame& t = r.top();
    in_text = in_text && t.str == kBody && t.u8_left == 0 &&
              (t.kind == Kind::String || (t.kind == Kind::Object && t.at == kInKey));
  }
  for (size_t id = 0; id < token_bytes.size() && id < logits.size(); ++id) {
    const std::string& b = token_bytes[id];
    bool ok = !b.empty();
    if (ok) {
      int8_t& known = first[static_cast<unsigned char>(b[0])];
      if (known < 0) {
        g.copy_from(*this);
        known = g.step_all(b[0]) ? 1 : 0;
      }
      ok = known == 1;
    }
    uint32_t chars = 0;
    if (ok && b.size() > 1 && in_text && plain_text(b, chars)) {
      ok = false;
      for (size_t i = 0; i < readings_.size() && !ok; ++i) ok = text_takes(readings_[i].top(), b, chars);
    } else if (ok && b.size() > 1) {
      g.copy_from(*this);
      for (char c : b)
        if (!(ok = g.step_all(c))) break;
    }
    if (ok)
      ++allowed;
    else
      logits[id] = -std::numeric_limits<float>::infinity();
  }
  for (size_t id = token_bytes.size(); id < logits.size(); ++id) logits[id] = -std::numeric_limits<float>::infinity();
  return allowed;
}

size_t JsonGrammar::mask(std::span<const std::string> token_bytes, std::span<float> logits,
                         std::span<const int32_t> ends) const {
  std::vector<std::pair<size_t, float>> kept;
  if (can_end())
    for (const int32_t id : ends)
      if (id >= 0 && static_cast<size_t>(id) < logits.size()) kept.emplace_back(id, logits[static_cast<size_t>(id)]);
  size_t allowed = mask(token_bytes, logits);
  for (const auto& [id, v] : kept) {
    allowed += std::isinf(logits[id]) && !std::isinf(v);
    logits[id] = v;
  }
  return allowed;
}

bool JsonGrammar::text_takes(const Frame& t, const std::string& b, uint32_t chars) {
  const SchemaNode& n = *t.node;
  if (t.kind == Kind::String) {
    if (chars > n.max_length - t.count) return false;
    if (!n.pattern) return true;
    return n.pattern->run(static_cast<int32_t>(t.cand), b) != CharDfa::kDead;
  }
  if (n.additional) return true;
  for (size_t i = 0; i < n.properties.size(); ++i) {
    const uint64_t m = bit(static_cast<int>(i));
    if ((t.cand & m) && !(t.seen & m) && n.properties[i].key.compare(t.pos, b.size(), b) == 0 &&
        n.properties[i].key.size() >= t.pos + b.size())
      return true;
  }
  return false;
}

bool JsonGrammar::step_all(char c) {
  forks_.clear();
  size_t kept = 0;
  for (size_t i = 0; i < readings_.size(); ++i) {
    if (!step(readings_[i], c)) continue;
    if (kept != i) copy_reading(readings_[kept], readings_[i]);
    ++kept;
  }
  readings_.resize(kept);
  for (const Reading& f : forks_)
    if (readings_.size() < static_cast<size_t>(kMaxReadings)) readings_.push_back(f);
  forks_.clear();
  return !readings_.empty();
}

bool JsonGrammar::space(Reading& r, char c) const {
  switch (r.ws) {
    case kWsNone:
      if (c != ' ' && c != '\n') return false;
      r.ws = c == ' ' ? kWsSpace : kWsNewline;
      return true;
    case kWsSpace:
      return false;
    case kWsNewline:
      if (c == '\n') {
        r.ws = kWsTwoNewlines;
        return true;
      }
      [[fallthrough]];
    default:
      if ((c != ' ' && c != '\t') || r.ws_indent >= kMaxWhitespace) return false;
      r.ws = kWsIndent;
      ++r.ws_indent;
      return true;
  }
}

bool JsonGrammar::push(Reading& r, const Frame& f) const {
  const bool container = f.kind == Kind::Object || f.kind == Kind::Array;
  if (container && r.depth - 1 >= kMaxDepth) return false;  // every frame above the root is a container
  r.f[r.depth++] = f;
  return true;
}

// The value on top closed: its container (or the root) takes it.
bool JsonGrammar::value_done(Reading& r) const {
  --r.depth;
  Frame& p = r.top();
  switch (p.kind) {
    case Kind::Root:
      p.at = kDone;
      return true;
    case Kind::Object:
      if (p.prop >= 0) p.seen |= bit(p.prop);
      p.at = kAfter;
      return true;
    case Kind::Array:
      ++p.count;
      p.at = kArrAfter;
      return true;
    default:
      return false;
  }
}

// c is the first byte of a value that schema node n describes.
bool JsonGrammar::start_value(Reading& r, const SchemaNode* n, char c, int alias_depth) {
  using K = SchemaNode::Kind;
  Frame f{};
  f.node = n;
  switch (n->kind) {
    case K::AnyOf: {
      if (alias_depth >= JsonSchema::kMaxAnyOfDepth) return false;
      Reading base, trial;
      copy_reading(base, r);
      bool any = false;
      for (const SchemaNode* alt : n->alternatives) {
        copy_reading(trial, base);
        if (!start_value(trial, alt, c, alias_depth + 1)) continue;
        if (!any)
          copy_reading(r, trial);
        else if (readings_.size() + forks_.size() < static_cast<size_t>(kMaxReadings))
          forks_.push_back(trial);
        any = true;
      }
      return any;
    }
    case K::Any:
      if (c == '{') return start_value(r, schema_->any_object_node(), c, alias_depth);
      if (c == '[') return start_value(r, schema_->any_array_node(), c, alias_depth);
      if (c == '"') return start_value(r, schema_->any_string_node(), c, alias_depth);
      if (c == '-' || is_digit(c)) return start_value(r, schema_->any_number_node(), c, alias_depth);
      return start_value(r, schema_->any_literal_node(), c, alias_depth);
    case K::Object:
      if (c != '{') return false;
      f.kind = Kind::Object;
      f.at = kFirst;
      f.prop = -1;
      return push(r, f);
    case K::Array:
      if (c != '[') return false;
      f.kind = Kind::Array;
      f.at = kArrFirst;
      return push(r, f);
    case K::String:
      if (c != '"') return false;
      f.kind = Kind::String;
      f.str = kBody;
      return push(r, f);
    case K::Number:
    case K::Integer:
      f.kind = Kind::Number;
      f.count = 1;
      if (c == '-') {
        f.at = kMinus;
        f.count = 0;
        f.cand = 1;
      } else if (c == '0') {
        f.at = kZero;
      } else if (is_digit(c)) {
        f.at = kInt;
        f.seen = static_cast<uint64_t>(c - '0');
      } else {
        return false;
      }
      return range_reachable(f) && push(r, f);
    case K::Literal: {
      f.kind = Kind::Literal;
      for (size_t i = 0; i < n->texts.size(); ++i)
        if (n->texts[i][0] == c) f.cand |= bit(static_cast<int>(i));
      if (f.cand == 0 || !push(r, f)) return false;
      return literal_advanced(r);
    }
  }
  return false;
}

bool JsonGrammar::object_step(Reading& r, char c) {
  Frame& t = r.top();
  const SchemaNode& n = *t.node;
  const uint64_t declared = first_bits(n.properties.size());
  const bool more_keys = n.additional || (declared & ~t.seen) != 0;
  const bool may_close = (t.seen & n.required) == n.required;
  switch (t.at) {
    case kFirst:
      if (space(r, c)) return true;
      if (c == '}') return may_close && value_done(r);
      [[fallthrough]];
    case kKeyNext:
      if (space(r, c)) return true;
      if (c != '"' || !more_keys) return false;
      t.at = kInKey;
      t.str = kBody;
      t.pos = 0;
      t.cand = declared;
      return true;
    case kInKey: {
      const StrByte b = string_byte(t, c);
      if (b == StrByte::Bad) return false;
      if (b == StrByte::Closes) {
        t.at = kColon;
        for (size_t i = 0; i < n.properties.size(); ++i) {
          if (!(t.cand & bit(static_cast<int>(i))) || n.properties[i].key.size() != t.pos) continue;
          if (t.seen & bit(static_cast<int>(i))) return false;  // a key twice
          t.prop = static_cast<int8_t>(i);
          return true;
        }
        t.prop = -1;
        return n.additional != nullptr;
      }
      uint64_t keep = 0;
      for (size_t i = 0; i < n.properties.size(); ++i) {
        const std::string& key = n.properties[i].key;
        if ((t.cand & bit(static_cast<int>(i))) && t.pos < key.size() && key[t.pos] == c)
          keep |= bit(static_cast<int>(i));
      }
      t.cand = keep;
      ++t.pos;
      return n.additional || (keep & ~t.seen) != 0;
    }
    case kColon:
      if (space(r, c)) return true;
      if (c != ':') return false;
      t.at = kValue;
      return true;
    case kValue:
      if (space(r, c)) return true;
      return start_value(r, t.prop >= 0 ? n.properties[static_cast<size_t>(t.prop)].node : n.additional, c, 0);
    case kAfter:
      if (space(r, c)) return true;
      if (c == ',') {
        t.at = kKeyNext;
        return more_keys;
      }
      return c == '}' && may_close && value_done(r);
  }
  return false;
}

bool JsonGrammar::array_step(Reading& r, char c) {
  Frame& t = r.top();
  const SchemaNode& n = *t.node;
  switch (t.at) {
    case kArrFirst:
      if (space(r, c)) return true;
      if (c == ']') return n.min_items == 0 && value_done(r);
      if (n.max_items == 0) return false;
      t.at = kArrValue;
      return start_value(r, t.count < n.prefix_items.size() ? n.prefix_items[t.count] : n.items, c, 0);
    case kArrValue:
      if (space(r, c)) return true;
      return start_value(r, t.count < n.prefix_items.size() ? n.prefix_items[t.count] : n.items, c, 0);
    case kArrAfter:
      if (space(r, c)) return true;
      if (c == ',') {
        t.at = kArrValue;
        return t.count < n.max_items;
      }
      return c == ']' && t.count >= n.min_items && value_done(r);
  }
  return false;
}

bool JsonGrammar::number_step(Reading& r, char c) {
  Frame& t = r.top();
  const bool integer = t.node->kind == SchemaNode::Kind::Integer;
  const bool room = !t.node->bounded_digits || t.count < kMaxSchemaDigits;  // for one more digit
  auto to = [&](NumberAt at, uint32_t count) {
    t.at = at;
    t.count = count;
    return true;
  };
  const bool rules = t.node->numbers.any();
  // A digit of the integer part or the fraction: the value so far, for the rules.
  auto digit = [&](NumberAt at, uint32_t count) {
    if (at == kFrac)
      t.frac = t.frac * 10 + static_cast<uint64_t>(c - '0');
    else
      t.seen = t.seen * 10 + static_cast<uint64_t>(c - '0');
    return to(at, count) && range_reachable(t);
  };
  switch (t.at) {
    case kMinus:
      if (c == '0') return digit(kZero, 1);
      if (is_digit(c)) return digit(kInt, 1);
      return false;
    case kInt:
    case kFrac:
    case kExpDigits:
      if (is_digit(c))
        return room &&
               (t.at == kExpDigits ? to(kExpDigits, t.count + 1) : digit(static_cast<NumberAt>(t.at), t.count + 1));
      [[fallthrough]];
    case kZero:
      if (c == '.' && t.at != kFrac && t.at != kExpDigits) return !integer && to(kDot, 0) && range_reachable(t);
      if ((c == 'e' || c == 'E') && t.at != kExpDigits) return !integer && !rules && to(kExp, 0);
      return in_range(t) && value_done(r) && step(r, c);  // c belongs to what follows the number
    case kDot:
      return is_digit(c) && digit(kFrac, 1);
    case kExp:
      if (c == '+' || c == '-') return to(kExpSign, 0);
      [[fallthrough]];
    case kExpSign:
      return is_digit(c) && to(kExpDigits, 1);
  }
  return false;
}

bool JsonGrammar::literal_step(Reading& r, char c) {
  Frame& t = r.top();
  const std::vector<std::string>& texts = t.node->texts;
  uint64_t keep = 0;
  bool whole_number = false;  // a number text matched to its end: c may follow it
  for (size_t i = 0; i < texts.size(); ++i) {
    if (!(t.cand & bit(static_cast<int>(i)))) continue;
    if (t.pos < texts[i].size())
      keep |= texts[i][t.pos] == c ? bit(static_cast<int>(i)) : 0;
    else
      whole_number = true;
  }
  if (keep == 0) return whole_number && value_done(r) && step(r, c);
  t.cand = keep;
  return literal_advanced(r);
}

// The top literal matched one more byte. A whole text that does not end in
// a digit closes itself (strings, containers, true/false/null); a number
// waits for the byte after it.
bool JsonGrammar::literal_advanced(Reading& r) const {
  Frame& t = r.top();
  const std::vector<std::string>& texts = t.node->texts;
  ++t.pos;
  for (size_t i = 0; i < texts.size(); ++i)
    if ((t.cand & bit(static_cast<int>(i))) && texts[i].size() == t.pos && !is_digit(texts[i].back()))
      return value_done(r);
  return true;
}

bool JsonGrammar::step(Reading& r, char c) {
  if (!is_ws(c)) {
    r.ws = kWsNone;
    r.ws_indent = 0;
  }
  Frame& t = r.top();
  switch (t.kind) {
    case Kind::Root:
      if (space(r, c)) return true;
      return t.at == kBefore && start_value(r, t.node, c, 0);
    case Kind::Object:
      return object_step(r, c);
    case Kind::Array:
      return array_step(r, c);
    case Kind::Number:
      return number_step(r, c);
    case Kind::Literal:
      return literal_step(r, c);
    case Kind::String: {
      const uint8_t was = t.str, left = t.u8_left;
      const StrByte b = string_byte(t, c);
      if (b == StrByte::Bad) return false;
      if (b == StrByte::Closes)
        return t.count >= t.node->min_length &&
               (!t.node->pattern || t.node->pattern->accepts(static_cast<int32_t>(t.cand))) && value_done(r);
      if (b == StrByte::Char && t.count++ >= t.node->max_length) return false;
      return !t.node->pattern || pattern_byte(t, c, was, left);
    }
  }
  return false;
}

}  // namespace ss
