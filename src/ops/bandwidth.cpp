#include "ops/bandwidth.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <vector>

#include "ops/clones.h"
#include "util/mapped_file.h"

namespace ss {

namespace {
// Sum of words [0, n) (n % 64 == 0) in 64 independent partial sums: four
// 512-bit accumulators in the AVX-512 clone, so the adds never wait on each
// other and the loop runs as fast as memory delivers. (A float dot product
// compiled for baseline x86-64 held the first probe at about 60% of what
// the machine reads.)
SS_CLONE_IMPL uint32_t read_sum_impl(const uint32_t* x, size_t n) {
  uint32_t acc[64] = {};
  for (size_t i = 0; i < n; i += 64)
    for (int k = 0; k < 64; ++k) acc[k] += x[i + k];
  uint32_t s = 0;
  for (uint32_t a : acc) s += a;
  return s;
}
SS_CLONED(uint32_t, read_sum, (const uint32_t* x, size_t n), (x, n))

// The sum of words [0, n) of a and of b (n % 64 == 0), read side by side:
// two far-apart streams per core, as the decode GEMVs read. kHint: every
// line asked for kAheadWords ahead in both (at two threads on the Zen 5 VM
// decode had outrun the plain sum by 12-23%; this sweep reads 22-39% faster
// than it there, 2-7% at one thread; 8 KiB ahead read the same within
// noise). Without the hint (the hardware prefetchers alone), at one thread
// the same VM read two streams 20-30% faster than one, and faster than
// with it.
constexpr size_t kAheadWords = 1024;  // 4 KiB
template <bool kHint>
[[gnu::always_inline]] inline uint32_t pair_sum(const uint32_t* a, const uint32_t* b, size_t n) {
  uint32_t acc[2][32] = {};
  for (size_t i = 0; i < n; i += 64) {
    if constexpr (kHint)
      for (size_t line = 0; line < 64; line += 16) {
        __builtin_prefetch(a + i + kAheadWords + line, 0, 3);
        __builtin_prefetch(b + i + kAheadWords + line, 0, 3);
      }
    for (int k = 0; k < 32; ++k) {
      acc[0][k] += a[i + k] + a[i + 32 + k];
      acc[1][k] += b[i + k] + b[i + 32 + k];
    }
  }
  uint32_t s = 0;
  for (int k = 0; k < 32; ++k) s += acc[0][k] + acc[1][k];
  return s;
}
SS_CLONE_IMPL uint32_t read_pair_sum_impl(const uint32_t* a, const uint32_t* b, size_t n) {
  return pair_sum<true>(a, b, n);
}
SS_CLONED(uint32_t, read_pair_sum, (const uint32_t* a, const uint32_t* b, size_t n), (a, b, n))
SS_CLONE_IMPL uint32_t read_pair_sum_bare_impl(const uint32_t* a, const uint32_t* b, size_t n) {
  return pair_sum<false>(a, b, n);
}
SS_CLONED(uint32_t, read_pair_sum_bare, (const uint32_t* a, const uint32_t* b, size_t n), (a, b, n))

// The sum of words [0, n) of each of four ranges (n % 64 == 0), read side by
// side without hints: four far-apart streams per core, as the Q4_0 and Q8_0
// decode GEMVs read with one or two activation rows (at one thread on the
// Zen 5 VM the Q8_0 kernel read 10-20% faster with four streams than with
// two).
SS_CLONE_IMPL uint32_t read_quad_sum_bare_impl(const uint32_t* a, const uint32_t* b, const uint32_t* c,
                                               const uint32_t* d, size_t n) {
  const uint32_t* p[4] = {a, b, c, d};
  uint32_t acc[4][16] = {};
  for (size_t i = 0; i < n; i += 64)
    for (int u = 0; u < 4; ++u)
      for (int k = 0; k < 16; ++k) acc[u][k] += p[u][i + k] + p[u][i + 16 + k] + p[u][i + 32 + k] + p[u][i + 48 + k];
  uint32_t s = 0;
  for (const auto& row : acc)
    for (uint32_t v : row) s += v;
  return s;
}
SS_CLONED(uint32_t, read_quad_sum_bare,
          (const uint32_t* a, const uint32_t* b, const uint32_t* c, const uint32_t* d, size_t n), (a, b, c, d, n))

// Pieces of 64 KiB (the last of a range shorter): the plain sweep hands
// them out to the threads as they come free.
struct Piece {
  const uint32_t* words;
  size_t n;
};

std::vector<Piece> pieces_of(std::span<const ByteRange> ranges, size_t* bytes) {
  constexpr size_t kPieceWords = 16384;  // 64 KiB
  std::vector<Piece> pieces;
  *bytes = 0;
  for (const ByteRange& r : ranges) {
    const auto* w = static_cast<const uint32_t*>(r.data);
    const size_t words = r.bytes / 256 * 64;
    for (size_t at = 0; at < words; at += kPieceWords) pieces.push_back({w + at, std::min(kPieceWords, words - at)});
    *bytes += words * 4;
  }
  return pieces;
}

// Pieces at[0..G) read side by side (G = 1, 2 or 4; hint: two streams with
// software prefetch), each to its own end: the streams run together for the
// shortest piece's words, the longer pieces' rest alone.
template <int G>
uint32_t read_pieces(const std::vector<Piece>& pieces, const size_t (&at)[G], bool hint = false) {
  size_t n = pieces[at[0]].n;
  for (size_t i : at) n = std::min(n, pieces[i].n);
  uint32_t s = 0;
  if constexpr (G == 1) {
    return read_sum(pieces[at[0]].words, n);
  } else if constexpr (G == 2) {
    const uint32_t *a = pieces[at[0]].words, *b = pieces[at[1]].words;
    s = hint ? read_pair_sum(a, b, n) : read_pair_sum_bare(a, b, n);
  } else {
    static_assert(G == 4);
    s = read_quad_sum_bare(pieces[at[0]].words, pieces[at[1]].words, pieces[at[2]].words, pieces[at[3]].words, n);
  }
  for (size_t i : at)
    if (pieces[i].n > n) s += read_sum(pieces[i].words + n, pieces[i].n - n);
  return s;
}

// A thread's share [lo, hi) of the pieces as G parts read side by side:
// piece i with i + part, i + 2 part... for each i of the first part, then
// the pieces left over one at a time.
template <int G>
uint32_t read_share_in_parts(const std::vector<Piece>& pieces, size_t lo, size_t hi, bool hint) {
  const size_t part = (hi - lo) / G;
  uint32_t s = 0;
  for (size_t i = lo; i < lo + part; ++i) {
    size_t at[G];
    for (int u = 0; u < G; ++u) at[u] = i + static_cast<size_t>(u) * part;
    s += read_pieces<G>(pieces, at, hint);
  }
  for (size_t i = lo + G * part; i < hi; ++i) s += read_pieces<1>(pieces, {i});
  return s;
}

// One sweep: Plain hands out the pieces one at a time; the stream methods
// give each thread a contiguous share of them (as a GEMV's rows are split)
// and read its halves (or quarters) side by side, then the pieces left over
// alone.
ReadSweep sweep(ThreadPool& pool, const std::vector<Piece>& pieces, size_t bytes, ReadMethod method) {
  std::atomic<uint32_t> sum{0};
  std::atomic<size_t> next{0};
  const size_t threads = static_cast<size_t>(pool.size());
  const auto start = std::chrono::steady_clock::now();
  pool.parallel_for(threads, [&](size_t first, size_t last) {
    uint32_t s = 0;
    if (method == ReadMethod::Plain) {
      for (size_t i; (i = next.fetch_add(1, std::memory_order_relaxed)) < pieces.size();)
        s += read_pieces<1>(pieces, {i});
    } else {
      for (size_t t = first; t < last; ++t) {
        const size_t lo = pieces.size() * t / threads, hi = pieces.size() * (t + 1) / threads;
        if (method == ReadMethod::FourBareStreams)
          s += read_share_in_parts<4>(pieces, lo, hi, false);
        else
          s += read_share_in_parts<2>(pieces, lo, hi, method == ReadMethod::TwoStreams);
      }
    }
    sum.fetch_add(s, std::memory_order_relaxed);
  });
  const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return {static_cast<double>(bytes) / sec, sum.load()};
}
}  // namespace

ReadSweep read_sweep(ThreadPool& pool, std::span<const ByteRange> ranges, ReadMethod method) {
  size_t bytes = 0;
  const auto pieces = pieces_of(ranges, &bytes);
  if (bytes == 0) return {0, 0};
  return sweep(pool, pieces, bytes, method == ReadMethod::Best ? ReadMethod::Plain : method);
}

double measure_read_bandwidth(ThreadPool& pool, std::span<const ByteRange> ranges, int reps, ReadMethod method) {
  size_t bytes = 0;
  const auto pieces = pieces_of(ranges, &bytes);
  if (bytes == 0) return 0;
  double best = 0;
  for (int r = 0; r < reps; ++r)
    for (ReadMethod m : kReadMethods)
      if (method == ReadMethod::Best || method == m) best = std::max(best, sweep(pool, pieces, bytes, m).bytes_per_s);
  return best;
}

double measure_read_bandwidth(ThreadPool& pool, size_t bytes, int reps) {
  const size_t n = bytes / 4;
  // In huge pages where the system allows, as the engine keeps its
  // interleaved weights: the probe measures the best read speed the engine
  // could reach, not one held back by TLB misses.
  const auto mem = allocate_huge(n * 4);
  auto* const buf = reinterpret_cast<uint32_t*>(mem.get());
  // Written once, so every page is resident, with varied values: on this
  // project's VMs a buffer of one repeated value (zeros above all) read up to
  // 40% faster than the random-looking bytes weights are.
  uint32_t state = 1;
  for (size_t i = 0; i < n; ++i) buf[i] = state = state * 1664525u + 1013904223u;
  const ByteRange all{buf, n * 4};
  return measure_read_bandwidth(pool, std::span<const ByteRange>(&all, 1), reps);
}

}  // namespace ss
