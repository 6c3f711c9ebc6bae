#include "kv/policy.h"

#include <algorithm>
#include <charconv>
#include <vector>

namespace ss {

namespace {
std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  for (size_t i = 0; i <= s.size(); ++i)
    if (i == s.size() || s[i] == sep) {
      out.push_back(s.substr(start, i - start));
      start = i + 1;
    }
  return out;
}

bool parse_int(std::string_view s, int64_t& out) {
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size();
}
}  // namespace

std::vector<int64_t> KvPolicy::resident(int64_t n_seen) const {
  std::vector<int64_t> out;
  const int64_t s = std::min(sinks, n_seen);
  for (int64_t u = 0; u < s; ++u) out.push_back(u);
  const int64_t w0 = bounded() ? std::max(sinks, n_seen - window) : sinks;
  for (int64_t u = w0; u < n_seen; ++u) out.push_back(u);
  return out;
}

KvPolicy KvPolicy::sinks_window(int64_t s, int64_t w) {
  KvPolicy p;
  p.kind = s > 0 ? PolicyKind::Sinks : PolicyKind::Window;
  p.sinks = s;
  p.window = w;
  return p;
}

Result<KvPolicy> KvPolicy::parse(std::string_view spec, int64_t trained_context) {
  const auto parts = split(spec, ':');
  const std::string s(spec);
  auto bad = [&](const std::string& why) {
    return make_error("invalid policy '" + s + "': " + why +
                      " (expected dense, window:W, sinks:S:W, h2o:S:R:H or recompute:L)");
  };
  constexpr int64_t kMax = int64_t{1} << 24;
  std::vector<int64_t> nums;
  for (size_t i = 1; i < parts.size(); ++i) {
    int64_t v;
    if (!parse_int(parts[i], v)) return bad(std::string("'").append(parts[i]).append("' is not an integer"));
    if (v < 0 || v > kMax) return bad("value out of range");
    nums.push_back(v);
  }
  KvPolicy p;
  const auto kind = parts[0];
  const int64_t ctx = trained_context > 0 ? trained_context : 512;
  if (kind == "dense") {
    if (!nums.empty()) return bad("dense takes no arguments");
    return p;
  }
  if (kind == "window") {
    if (nums.size() > 1) return bad("window takes one argument");
    p.kind = PolicyKind::Window;
    p.window = nums.empty() ? ctx : nums[0];
    if (p.window < 1) return bad("window must be >= 1");
    return p;
  }
  if (kind == "sinks") {
    if (nums.size() == 1 || nums.size() > 2) return bad("sinks takes S and W");
    p.kind = PolicyKind::Sinks;
    p.sinks = nums.empty() ? 4 : nums[0];
    p.window = nums.empty() ? ctx - 4 : nums[1];
    if (p.window < 1) return bad("window must be >= 1");
    if (p.sinks == 0) p.kind = PolicyKind::Window;
    return p;
  }
  if (kind == "h2o") {
    if (nums.size() != 3) return bad("h2o takes S, R and H");
    p.kind = PolicyKind::H2O;
    p.sinks = nums[0];
    p.window = nums[1];
    p.heavy = nums[2];
    if (p.window < 1) return bad("R (recent tokens) must be >= 1");
    return p;
  }
  if (kind == "recompute") return bad("recompute keeps no cache: it is not a cache policy");
  return bad("unknown kind");
}

std::string KvPolicy::name() const {
  switch (kind) {
    case PolicyKind::Dense:
      return "dense";
    case PolicyKind::Window:
      return "window:" + std::to_string(window);
    case PolicyKind::Sinks:
      return "sinks:" + std::to_string(sinks) + ":" + std::to_string(window);
    case PolicyKind::H2O:
      return "h2o:" + std::to_string(sinks) + ":" + std::to_string(window) + ":" + std::to_string(heavy);
  }
  return "?";
}

}  // namespace ss
