#include "util/cpu_features.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <string_view>
#include <utility>

#if defined(__x86_64__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace ss {

namespace {

#if defined(__x86_64__)
struct CpuidRegs {
  unsigned a = 0, b = 0, c = 0, d = 0;
};
CpuidRegs cpuid(unsigned leaf, unsigned sub = 0) {
  CpuidRegs r;
  if (!__get_cpuid_count(leaf, sub, &r.a, &r.b, &r.c, &r.d)) return CpuidRegs{};
  return r;
}
uint64_t xgetbv0() {
  unsigned lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<uint64_t>(hi) << 32) | lo;
}
bool bit(unsigned reg, int n) { return (reg >> n) & 1; }

// Linux (5.16+) hands out the AMX tile data state only on request.
bool amx_tiles_granted() {
  constexpr long kReqXcompPerm = 0x1023, kXtileData = 18;
  return syscall(SYS_arch_prctl, kReqXcompPerm, kXtileData) == 0;
}

uint32_t detect() {
  const CpuidRegs l1 = cpuid(1);
  const unsigned max_leaf = cpuid(0).a;
  const CpuidRegs l7 = max_leaf >= 7 ? cpuid(7, 0) : CpuidRegs{};
  const CpuidRegs l7s1 = max_leaf >= 7 && l7.a >= 1 ? cpuid(7, 1) : CpuidRegs{};
  uint32_t f = 0;
  if (bit(l1.c, 9) && bit(l1.c, 19) && bit(l1.c, 20)) f |= kCpuSse4;
  // AVX state needs the OS's consent (OSXSAVE + XCR0's SSE and AVX bits).
  const bool osxsave = bit(l1.c, 27);
  const uint64_t xcr0 = osxsave ? xgetbv0() : 0;
  const bool ymm = (xcr0 & 0x6) == 0x6, zmm = ymm && (xcr0 & 0xE0) == 0xE0;
  if (ymm && bit(l1.c, 28) && bit(l1.c, 12) && bit(l1.c, 29) && bit(l7.b, 5)) f |= kCpuAvx2;
  if ((f & kCpuAvx2) && bit(l7s1.a, 4)) f |= kCpuAvxVnni;
  const bool avx512 = zmm && (f & kCpuAvx2) && bit(l7.b, 16) && bit(l7.b, 17) && bit(l7.b, 30) && bit(l7.b, 31);
  if (avx512) {
    f |= kCpuAvx512;
    if (bit(l7.c, 11)) f |= kCpuAvx512Vnni;
    if (bit(l7s1.a, 5)) f |= kCpuAvx512Bf16;
  }
  // AMX kernels also use AVX-512 (conversion, scaling), so they need it too.
  const bool tiles = avx512 && bit(l7.d, 24) && (xcr0 & 0x60000) == 0x60000;
  if (tiles && (bit(l7.d, 25) || bit(l7.d, 22)) && amx_tiles_granted()) {
    if (bit(l7.d, 25)) f |= kCpuAmxInt8;
    if (bit(l7.d, 22)) f |= kCpuAmxBf16;
  }
  return f;
}
#else
uint32_t detect() { return 0; }
#endif

uint32_t allowed(CpuLevel level) {
  switch (level) {
    case CpuLevel::Sse4:
      return kCpuSse4;
    case CpuLevel::Avx2:
      return kCpuSse4 | kCpuAvx2;
    case CpuLevel::AvxVnni:
      return kCpuSse4 | kCpuAvx2 | kCpuAvxVnni;
    case CpuLevel::Avx512:
      return kCpuSse4 | kCpuAvx2 | kCpuAvxVnni | kCpuAvx512 | kCpuAvx512Vnni | kCpuAvx512Bf16;
    case CpuLevel::Native:
      break;
  }
  return ~0u;
}

struct CapFromEnv {
  CpuLevel level = CpuLevel::Native;
  bool set = false;  // a valid value was given
  std::string error;
};
const CapFromEnv& cap_from_env() {
  static const CapFromEnv c = [] {
    CapFromEnv out;
    const char* v = std::getenv("SINKSTREAM_CPU");
    if (v == nullptr || *v == '\0') return out;
    auto parsed = parse_cpu_level(v);
    if (parsed.ok()) {
      out.level = *parsed;
      out.set = true;
    } else
      out.error = "SINKSTREAM_CPU=" + std::string(v) + ": " + parsed.error().message;
    return out;
  }();
  return c;
}

// -1: not set yet (the environment decides at first use).
std::atomic<int> g_cap{-1};
std::atomic<uint32_t> g_generation{0};
// cpu_usable() cached (kernels ask at every call); kUnset until first asked.
constexpr uint32_t kUnset = 1u << 31;
std::atomic<uint32_t> g_usable{kUnset};

}  // namespace

const char* cpu_level_name(CpuLevel level) {
  switch (level) {
    case CpuLevel::Sse4:
      return "sse4";
    case CpuLevel::Avx2:
      return "avx2";
    case CpuLevel::AvxVnni:
      return "avxvnni";
    case CpuLevel::Avx512:
      return "avx512";
    case CpuLevel::Native:
      break;
  }
  return "native";
}

Result<CpuLevel> parse_cpu_level(std::string_view name) {
  for (CpuLevel l : {CpuLevel::Sse4, CpuLevel::Avx2, CpuLevel::AvxVnni, CpuLevel::Avx512, CpuLevel::Native})
    if (name == cpu_level_name(l)) return l;
  return make_error("unknown CPU level '" + std::string(name) + "' (expected native, avx512, avxvnni, avx2 or sse4)");
}

uint32_t cpu_detected() {
  static const uint32_t f = detect();
  return f;
}

CpuLevel cpu_cap() {
  const int c = g_cap.load(std::memory_order_relaxed);
  return c < 0 ? cap_from_env().level : static_cast<CpuLevel>(c);
}

std::string cpu_cap_error() { return cap_from_env().error; }

bool cpu_cap_from_env() { return g_cap.load(std::memory_order_relaxed) < 0 && cap_from_env().set; }

uint32_t cpu_usable() {
  uint32_t u = g_usable.load(std::memory_order_relaxed);
  if (u == kUnset) {
    u = cpu_detected() & allowed(cpu_cap());
    g_usable.store(u, std::memory_order_relaxed);
  }
  return u;
}

void set_cpu_cap(CpuLevel level) {
  g_cap.store(static_cast<int>(level), std::memory_order_relaxed);
  g_usable.store(cpu_detected() & allowed(level), std::memory_order_relaxed);
  g_generation.fetch_add(1, std::memory_order_release);
}

uint32_t cpu_cap_generation() { return g_generation.load(std::memory_order_acquire); }

std::vector<CpuLevel> cpu_levels_to_test(uint32_t features_that_matter) {
  std::vector<CpuLevel> out;
  uint32_t prev = ~0u;
  for (int l = static_cast<int>(cpu_cap()); l >= 0; --l) {
    const uint32_t u = cpu_detected() & allowed(static_cast<CpuLevel>(l)) & features_that_matter;
    if (u == prev) continue;
    out.push_back(static_cast<CpuLevel>(l));
    prev = u;
  }
  return out;
}

std::string cpu_feature_names(uint32_t bits) {
  static const std::pair<CpuFeature, const char*> kNames[] = {{kCpuSse4, "SSE4"},
                                                              {kCpuAvx2, "AVX2"},
                                                              {kCpuAvxVnni, "AVX_VNNI"},
                                                              {kCpuAvx512, "AVX512"},
                                                              {kCpuAvx512Vnni, "AVX512_VNNI"},
                                                              {kCpuAvx512Bf16, "AVX512_BF16"},
                                                              {kCpuAmxInt8, "AMX_INT8"},
                                                              {kCpuAmxBf16, "AMX_BF16"}};
  std::string out;
  for (const auto& [f, name] : kNames) {
    if (!(bits & f)) continue;
    if (!out.empty()) out += ' ';
    out += name;
  }
  return out.empty() ? "none" : out;
}

namespace {
// The CPU's vendor and family as CPUID reports them ("AuthenticAMD", 0x19
// for Zen 3/4, 0x1A for Zen 5; Intel cores are family 6).
struct CpuIdentity {
  std::string vendor;
  unsigned family = 0;
};

CpuIdentity cpu_identity() {
  CpuIdentity id;
#if defined(__x86_64__)
  const CpuidRegs l0 = cpuid(0);
  char vendor[13] = {};
  std::memcpy(vendor, &l0.b, 4);
  std::memcpy(vendor + 4, &l0.d, 4);
  std::memcpy(vendor + 8, &l0.c, 4);
  id.vendor = vendor;
  const unsigned a = l0.a >= 1 ? cpuid(1).a : 0;
  const unsigned base = (a >> 8) & 0xF;
  id.family = base == 0xF ? base + ((a >> 20) & 0xFF) : base;
#endif
  return id;
}

// A per-CPU default that an environment variable may override; an unknown
// value leaves the default and is reported (prefetch_env_error()).
template <class Mode>
struct EnvChoice {
  Mode mode{};
  std::string source = "default", error;
};

bool is_zen4() {
  const CpuIdentity id = cpu_identity();
  return id.vendor == "AuthenticAMD" && id.family == 0x19 && (cpu_detected() & kCpuAvx512);
}

// Sapphire Rapids and later (what the AMX VM measured): the memory system's
// kind, whatever cap SINKSTREAM_CPU sets, hence detected, not usable.
bool is_intel_amx() { return cpu_identity().vendor == "GenuineIntel" && (cpu_detected() & kCpuAmxInt8); }

// The default a knob takes on this CPU, and the name `source` reports.
template <class Mode>
struct CpuDefault {
  Mode mode;
  const char* source;
};

template <class Mode>
EnvChoice<Mode> choose(const char* var, CpuDefault<Mode> fallback,
                       std::initializer_list<std::pair<std::string_view, Mode>> values) {
  EnvChoice<Mode> out;
  out.mode = fallback.mode;
  out.source = fallback.source;
  const char* v = std::getenv(var);
  if (v == nullptr || *v == '\0') return out;
  std::string names;
  for (const auto& [name, mode] : values) {
    if (name == v) {
      out.mode = mode;
      out.source = var;
      return out;
    }
    names += (names.empty() ? "" : " or ") + std::string(name);
  }
  out.error = std::string(var) + "=" + v + ": expected " + names;
  return out;
}

const EnvChoice<DecodePrefetch>& q4_0_choice() {
  static const auto c = choose("SINKSTREAM_PREFETCH",
                               is_zen4() ? CpuDefault<DecodePrefetch>{DecodePrefetch::HardwareOnly, "default for Zen 4"}
                                         : CpuDefault<DecodePrefetch>{DecodePrefetch::Software, "default"},
                               {{"on", DecodePrefetch::Software}, {"off", DecodePrefetch::HardwareOnly}});
  return c;
}

// L1 unless this CPU's kind is one where L2 was measured faster for the type.
EnvChoice<PrefetchTarget> cache_choice(const char* var, bool l2_on_zen4, bool l2_on_intel_amx) {
  CpuDefault<PrefetchTarget> d{PrefetchTarget::L1, "default"};
  if (l2_on_zen4 && is_zen4()) d = {PrefetchTarget::L2, "default for Zen 4"};
  if (l2_on_intel_amx && is_intel_amx()) d = {PrefetchTarget::L2, "default for Intel with AMX"};
  return choose(var, d, {{"l1", PrefetchTarget::L1}, {"l2", PrefetchTarget::L2}});
}

const EnvChoice<PrefetchTarget>& q4k_choice() {
  static const auto c = cache_choice("SINKSTREAM_PREFETCH_Q4K", /*l2_on_zen4=*/false, /*l2_on_intel_amx=*/true);
  return c;
}

const EnvChoice<PrefetchTarget>& q5k_choice() {
  static const auto c = cache_choice("SINKSTREAM_PREFETCH_Q5K", /*l2_on_zen4=*/true, /*l2_on_intel_amx=*/true);
  return c;
}

const EnvChoice<PrefetchTarget>& q6k_choice() {
  static const auto c = cache_choice("SINKSTREAM_PREFETCH_Q6K", /*l2_on_zen4=*/true, /*l2_on_intel_amx=*/true);
  return c;
}
}  // namespace

DecodePrefetch decode_prefetch() { return q4_0_choice().mode; }
std::string decode_prefetch_source() { return q4_0_choice().source; }
PrefetchTarget q6k_prefetch_target() { return q6k_choice().mode; }
std::string q6k_prefetch_source() { return q6k_choice().source; }
PrefetchTarget q5k_prefetch_target() { return q5k_choice().mode; }
std::string q5k_prefetch_source() { return q5k_choice().source; }
PrefetchTarget q4k_prefetch_target() { return q4k_choice().mode; }
std::string q4k_prefetch_source() { return q4k_choice().source; }
std::string prefetch_env_error() {
  for (const std::string* e : {&q4_0_choice().error, &q4k_choice().error, &q5k_choice().error, &q6k_choice().error})
    if (!e->empty()) return *e;
  return "";
}

std::string cpu_model_name() {
#if defined(__x86_64__)
  if (cpuid(0x80000000).a >= 0x80000004) {
    char brand[49] = {};
    for (unsigned i = 0; i < 3; ++i) {
      const CpuidRegs r = cpuid(0x80000002 + i);
      std::memcpy(brand + 16 * i, &r.a, 4);
      std::memcpy(brand + 16 * i + 4, &r.b, 4);
      std::memcpy(brand + 16 * i + 8, &r.c, 4);
      std::memcpy(brand + 16 * i + 12, &r.d, 4);
    }
    std::string s(brand);
    const size_t b = s.find_first_not_of(' '), e = s.find_last_not_of(' ');
    if (b != std::string::npos) return s.substr(b, e - b + 1);
  }
#endif
  return "unknown";
}

}  // namespace ss
