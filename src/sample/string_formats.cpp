#include "sample/string_formats.h"

namespace ss {

namespace {

#define SS_DAY31 "(0[1-9]|[12][0-9]|3[01])"
#define SS_MONTH_DAY "((0[13578]|1[02])-" SS_DAY31 "|(0[469]|11)-(0[1-9]|[12][0-9]|30)|02-(0[1-9]|1[0-9]|2[0-8]))"
// Years divisible by 4 but not by 100, or by 400.
#define SS_LEAP_DAY "([0-9]{2}(0[48]|[2468][048]|[13579][26])|(0[048]|[2468][048]|[13579][26])00)-02-29"
#define SS_DATE "([0-9]{4}-" SS_MONTH_DAY "|" SS_LEAP_DAY ")"
#define SS_TIME "([01][0-9]|2[0-3]):[0-5][0-9]:([0-5][0-9]|60)(\\.[0-9]+)?([Zz]|[+-]([01][0-9]|2[0-3]):[0-5][0-9])"
#define SS_OCTET "(25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])"
#define SS_ATOM "[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+"
#define SS_LABEL "[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?"

struct Format {
  std::string_view name;
  const char* pattern;
};

constexpr Format kFormats[] = {
    {"date", "^" SS_DATE "$"},
    {"time", "^" SS_TIME "$"},
    {"date-time", "^" SS_DATE "[Tt]" SS_TIME "$"},
    {"uuid", "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"},
    {"ipv4", "^(" SS_OCTET "\\.){3}" SS_OCTET "$"},
    {"email", "^" SS_ATOM "(\\." SS_ATOM ")*@" SS_LABEL "(\\." SS_LABEL ")+$"},
};

}  // namespace

const char* format_pattern(std::string_view format) {
  for (const Format& f : kFormats)
    if (f.name == format) return f.pattern;
  return nullptr;
}

}  // namespace ss
