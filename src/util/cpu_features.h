#pragma once
// What this CPU offers, and how much of it this process may use.
//
// Every kernel that picks an instruction set asks cpu_usable() here (the
// Highway matmuls, the vector clones in ops/clones.h, the int8 VNNI/AMX and
// bf16 AMX kernels), so one cap moves all of them together: the environment
// variable SINKSTREAM_CPU (read once, at first use) or set_cpu_cap() makes a
// machine run the code paths of a lesser one. CI runs the test suite again
// under `avx2`, and under `avx512` where the CPU has AMX, so every dispatch
// level is exercised on whatever machine it lands on; a bug report can name
// the level that shows it.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "util/result.h"

namespace ss {

// Feature bits. Each means "the CPU has it and the OS saves its state"; the
// AMX bits also mean Linux granted this process the tile data (arch_prctl).
enum CpuFeature : uint32_t {
  kCpuSse4 = 1u << 0,        // SSE4.1 + SSE4.2 + SSSE3
  kCpuAvx2 = 1u << 1,        // AVX2 + FMA + F16C (every AVX2 CPU has the three)
  kCpuAvx512 = 1u << 2,      // AVX-512 F + BW + VL + DQ
  kCpuAvx512Vnni = 1u << 3,  // AVX512_VNNI (int8 dot products)
  kCpuAvx512Bf16 = 1u << 4,  // AVX512_BF16 (bf16 dot products)
  kCpuAmxInt8 = 1u << 5,     // AMX-TILE + AMX-INT8, tiles permitted
  kCpuAmxBf16 = 1u << 6,     // AMX-TILE + AMX-BF16, tiles permitted
  kCpuAvxVnni = 1u << 7,     // AVX-VNNI: vpdpbusd on ymm, VEX-encoded (AVX2 CPUs from Alder Lake on)
};

// Caps, weakest first. Each allows the features of the one before plus its
// own: Sse4 (x86-64 baseline + SSE4), Avx2 (+ AVX2/FMA/F16C: Haswell to
// Comet Lake, Zen 1-3), AvxVnni (+ AVX-VNNI: Alder Lake to Arrow Lake,
// Sierra Forest), Avx512 (+ all AVX-512 extensions, no AMX: a Zen 4/5 or
// Ice Lake profile), Native (everything detected, AMX included).
enum class CpuLevel { Sse4, Avx2, AvxVnni, Avx512, Native };

// Names as SINKSTREAM_CPU spells them: "sse4", "avx2", "avxvnni", "avx512",
// "native".
const char* cpu_level_name(CpuLevel level);
Result<CpuLevel> parse_cpu_level(std::string_view name);

// What the CPU and OS offer, detected once.
uint32_t cpu_detected();
// What kernels may use now: cpu_detected() within the cap.
uint32_t cpu_usable();
inline bool cpu_usable(CpuFeature f) { return (cpu_usable() & f) != 0; }

// The cap in force: SINKSTREAM_CPU when set and valid, else Native (an
// invalid value is reported by cpu_cap_error() and ignored).
CpuLevel cpu_cap();
// The cap in force came from SINKSTREAM_CPU (not the default, not set_cpu_cap).
bool cpu_cap_from_env();
// "SINKSTREAM_CPU=...: ..." when the variable held something unknown, else "".
std::string cpu_cap_error();
// Replaces the cap (tests, and a command-line choice). Kernels pick it up at
// their next call; no call may be in flight on another thread meanwhile.
void set_cpu_cap(CpuLevel level);
// Bumped by every set_cpu_cap: dispatchers that cache a choice (Highway's
// chosen target) compare it with the generation they applied.
uint32_t cpu_cap_generation();

// The cap in force and every weaker one that changes what is usable,
// strongest first (on a Zen 5 at native: native, avxvnni, avx2, sse4; on
// Sapphire Rapids: native, avx512, avxvnni, avx2, sse4; on Ice Lake, which
// has no AVX-VNNI: native, avx2, sse4): the dispatch levels tests walk through with
// ScopedCpuCap. Never above the cap, so SINKSTREAM_CPU bounds tests too.
// Levels that differ only in features outside `features_that_matter` count
// as one (the strongest), for code that looks at a few bits only.
std::vector<CpuLevel> cpu_levels_to_test(uint32_t features_that_matter = ~0u);

// The features in `bits` as a space-separated list ("AVX2 AVX512 ...").
std::string cpu_feature_names(uint32_t bits);
// The CPU's brand string ("AMD EPYC 9B45"), or "unknown".
std::string cpu_model_name();

// Whether Q4_0 decode (1-3 activation rows: ops/matmul_int8.cpp) prefetches
// the lines a few blocks ahead in software, besides what the hardware
// prefetchers fetch. Chosen per CPU from measurements (kernels_bench
// DecodeSweep, one thread, share of the read probe): on Zen 5 software
// prefetch lifts Q4_0 from 0.72-0.74 to 0.82-0.89; on Zen 4 it drags it from
// 0.83-0.92 down to 0.71-0.73 (TinyLlama Q4_0 decode there, one thread, four
// alternating runs: 37.1 -> 44.7 tok/s medians without it). So: off on AMD
// family 19h with AVX-512 (Zen 4), on everywhere else (what was measured
// before this knob). The K-quants keep their prefetch everywhere: on Zen 4
// Q6_K's sweep fell from 0.70-0.73 to 0.53-0.58 without it, and Q4_K_M
// decode was no faster (where Q5_K's and Q6_K's land: q5k_prefetch_target(),
// q6k_prefetch_target()). SINKSTREAM_PREFETCH=on|off overrides the choice
// (read once, at first use). Results are the same bits either way.
enum class DecodePrefetch { Software, HardwareOnly };
DecodePrefetch decode_prefetch();
// Where decode_prefetch() came from: "SINKSTREAM_PREFETCH", "default for
// Zen 4" or "default".
std::string decode_prefetch_source();

// Which cache the Q6_K GEMV's software prefetch (ops/matmul_int8.cpp,
// interleaved_q6k_tile) fills: L1 (prefetcht0) or L2 (prefetcht1). On Zen 4
// L2 reads faster (kernels_bench DecodeSweep, one thread, share of the read
// probe, two alternating rounds: Q6_K 0.71-0.74 -> 0.86-0.90; TinyLlama
// decode, tok/s, three alternating runs each: Q6_K 25.8-26.2 -> 32.2-32.9 at
// one thread and 42.6-45.4 -> 46.3-54.9 at two; Q4_K_M 36.1-36.8 ->
// 38.3-39.1 and 50.2-62.7 -> 63.9-66.8; Q5_K_M 28.2-28.6 -> 29.0-30.4 and
// 42.1-50.1 -> 46.1-52.6). Q4_K and Q5_K together into L2 made two threads
// slower (Q4_K_M 60.9-64.8 -> 47.0-64.3), so Q4_K stays in L1.
// So: L2 on Zen 4 (as decode_prefetch()) and on Intel with AMX (below,
// q5k_prefetch_target), L1 everywhere else (measured before this knob on
// Zen 5). SINKSTREAM_PREFETCH_Q6K=l1|l2 overrides it.
// With L2, each share also goes on into L1 one super-block ahead (session
// 42, alternating runs: DecodeSweep Q6_K 0.84-0.89 -> 0.90-0.94, three
// rounds; TinyLlama Q6_K decode 27.5-30.2 -> 31.5-32.1 tok/s at one thread
// and 35.4-35.9 -> 36.8-38.2 at two, three rounds each; Q4_K_M 38.7-40.6 ->
// 39.8-40.6 at one. Two super-blocks ahead read 0.69-0.72; Q4_K and Q5_K
// gained nothing from it: 0.81-0.88 -> 0.81-0.83, 0.78-0.79 -> 0.71-0.77).
enum class PrefetchTarget { L1, L2 };
PrefetchTarget q6k_prefetch_target();
// "SINKSTREAM_PREFETCH_Q6K", "default for Zen 4", "default for Intel with
// AMX" (Q4_K, Q5_K) or "default".
std::string q6k_prefetch_source();
// The same for Q5_K (interleaved_k45_tile), chosen on its own: on Zen 4 L2
// again reads faster (DecodeSweep Q5_K, one thread, three alternating
// rounds: 0.65-0.70 -> 0.76-0.79; TinyLlama Q5_K_M decode, tok/s: one thread
// 28.7-29.3 -> 30.9-31.0 in three rounds, two threads 40.8-51.2 -> 40.9-56.8
// in eight, medians 43.0 / 42.8: memory-bound there either way; eight
// sequences, one thread 93.5-106.3 -> 110.2-114.8).
// SINKSTREAM_PREFETCH_Q5K=l1|l2 overrides it.
// On Intel with AMX (an Emerald Rapids VM, 2 vCPUs) L2 reads faster for
// Q5_K and Q4_K both: TinyLlama decode as a share of a plain sweep over the
// same weights right after each step (`bench --bandwidth`), four alternating
// rounds: Q5_K_M 82% -> 85-88% at one thread and 76-80% -> 78-85% at two;
// Q4_K_M 79-81% -> 85-86% and 72-78% -> 72-83%. Q6_K there: 76-77% (L1)
// against 72-76% (L2) in two rounds of session 55, but in session 56 on the
// same VM kind (its clock then about twice as fast by a dependent add
// chain) 79-80% -> 90-92% at one thread and 77% -> 88% at two (two
// alternating rounds; decode 17.6-18.1 -> 19.1-19.8 tok/s and 33.6-36.5 ->
// 36.5-39.9, and in two more rounds 17.2-17.8 -> 19.4-20.8 and 32.2-33.7 ->
// 37.2-37.7), so Q6_K fills L2 there too. Source "default for Intel with
// AMX".
PrefetchTarget q5k_prefetch_target();
std::string q5k_prefetch_source();
// The same for Q4_K: L2 on Intel with AMX (above), L1 elsewhere, Zen 4
// included (Q4_K into L2 made two threads slower there).
// SINKSTREAM_PREFETCH_Q4K=l1|l2 overrides it.
PrefetchTarget q4k_prefetch_target();
std::string q4k_prefetch_source();

// The error text for a value of SINKSTREAM_PREFETCH, SINKSTREAM_PREFETCH_Q4K,
// SINKSTREAM_PREFETCH_Q5K or SINKSTREAM_PREFETCH_Q6K that is not known (""
// when all are fine).
std::string prefetch_env_error();

// Tests: sets the cap for a scope and restores the previous one after.
class ScopedCpuCap {
 public:
  explicit ScopedCpuCap(CpuLevel level) : prev_(cpu_cap()) { set_cpu_cap(level); }
  ~ScopedCpuCap() { set_cpu_cap(prev_); }
  ScopedCpuCap(const ScopedCpuCap&) = delete;
  ScopedCpuCap& operator=(const ScopedCpuCap&) = delete;

 private:
  CpuLevel prev_;
};

}  // namespace ss
