#pragma once
// JSON Schema string formats as anchored regexes (regex_to_gbnf.h's
// syntax), so "format" shapes a string as "pattern" does: the formats
// OpenAI's strict mode and llama.cpp's schema grammars honour.
#include <string_view>

namespace ss {

// The regex of `format`, or nullptr for a format read as an annotation.
//   date       RFC 3339 full-date, calendar-valid (Feb 29 in leap years only)
//   time       RFC 3339 full-time (leap second 60, fraction, Z or offset)
//   date-time  date "T" time (t and z in either case)
//   uuid       RFC 9562 text form, either case
//   ipv4       dotted quad, no leading zeros
//   email      dot-atom "@" a domain of two or more labels (the common
//              form; quoted local parts and address literals are not made)
const char* format_pattern(std::string_view format);

}  // namespace ss
