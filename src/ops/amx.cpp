#include "ops/amx.h"

#if defined(__x86_64__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace ss {

#if defined(__x86_64__)
namespace {
unsigned cpuid7_edx() {
  unsigned eax, ebx, ecx, edx;
  __asm__("cpuid" : "=a"(eax), "=b"(ebx), "=c"(ecx), "=d"(edx) : "a"(7), "c"(0));
  return edx;
}
}  // namespace

bool cpu_has_amx_int8() { return (cpuid7_edx() >> 25) & 1; }
bool cpu_has_amx_bf16() { return (cpuid7_edx() >> 22) & 1; }

bool amx_tiles_permitted() {
  static const bool ok = [] {
    if (!((cpuid7_edx() >> 24) & 1)) return false;
    constexpr long kReqXcompPerm = 0x1023, kXtileData = 18;
    return syscall(SYS_arch_prctl, kReqXcompPerm, kXtileData) == 0;
  }();
  return ok;
}
#else
bool cpu_has_amx_int8() { return false; }
bool cpu_has_amx_bf16() { return false; }
bool amx_tiles_permitted() { return false; }
#endif

}  // namespace ss
