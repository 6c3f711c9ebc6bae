#include "runtime/stream_mode.h"

#include <charconv>

namespace ss {

std::string StreamMode::name() const {
  return recompute() ? "recompute:" + std::to_string(recompute_len) : policy.name();
}

Result<StreamMode> StreamMode::parse(std::string_view spec, int64_t trained_context) {
  constexpr std::string_view kRecompute = "recompute";
  if (spec.substr(0, kRecompute.size()) != kRecompute) {
    SS_ASSIGN_OR_RETURN(const KvPolicy p, KvPolicy::parse(spec, trained_context));
    return cached(p);
  }
  const std::string s(spec);
  auto bad = [&](const std::string& why) { return make_error("invalid policy '" + s + "': " + why); };
  StreamMode m;
  m.recompute_len = trained_context > 0 ? trained_context : 512;
  const std::string_view rest = spec.substr(kRecompute.size());
  if (rest.empty()) return m;
  if (rest[0] != ':') return bad("unknown kind");
  const std::string_view num = rest.substr(1);
  int64_t v = 0;
  auto [p, ec] = std::from_chars(num.data(), num.data() + num.size(), v);
  if (num.empty() || ec != std::errc() || p != num.data() + num.size()) return bad("recompute takes one integer");
  if (v < 1 || v > (int64_t{1} << 24)) return bad("recompute length must be in [1, 2^24]");
  m.recompute_len = v;
  return m;
}

}  // namespace ss
