#include "ops/matmul_bf16.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "ops/amx.h"
#include "util/check.h"
#include "util/fp16.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace ss {

uint16_t to_bf16(float x) {
  uint32_t u = std::bit_cast<uint32_t>(x);
  if ((u & 0x7F800000u) == 0) return static_cast<uint16_t>((u >> 16) & 0x8000u);  // zero, subnormal: signed 0
  if ((u & 0x7F800000u) == 0x7F800000u && (u & 0x007FFFFFu) != 0)
    return static_cast<uint16_t>((u >> 16) | 0x0040u);  // NaN stays NaN
  u += 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

float from_bf16(uint16_t b) { return std::bit_cast<float>(static_cast<uint32_t>(b) << 16); }

namespace {

bool bf16_type(GgmlType t) { return t == GgmlType::Q4_0 || t == GgmlType::Q8_0; }

// Block b of a Q4_0 / Q8_0 row as 32 exact floats (d * q needs at most 18
// significant bits).
void block_floats(GgmlType t, const uint8_t* row, int64_t b, float* out) {
  uint16_t h;
  if (t == GgmlType::Q4_0) {
    const uint8_t* blk = row + b * 18;
    std::memcpy(&h, blk, 2);
    const float d = fp16_to_fp32(h);
    for (int i = 0; i < 16; ++i) {
      out[i] = d * static_cast<float>((blk[2 + i] & 0x0F) - 8);
      out[i + 16] = d * static_cast<float>((blk[2 + i] >> 4) - 8);
    }
  } else {
    const uint8_t* blk = row + b * 34;
    std::memcpy(&h, blk, 2);
    const float d = fp16_to_fp32(h);
    for (int i = 0; i < 32; ++i) out[i] = d * static_cast<float>(static_cast<int8_t>(blk[2 + i]));
  }
}

}  // namespace

void matmul_bf16_reference(const TensorView& w, const float* x, int n, float* y) {
  SS_CHECK(bf16_type(w.type) && w.ne0 % 32 == 0);
  const int64_t cols = w.ne0, rows = w.ne1, nb = cols / 32;
  std::vector<float> wr(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t b = 0; b < nb; ++b) block_floats(w.type, w.row(r), b, wr.data() + b * 32);
    for (auto& v : wr) v = from_bf16(to_bf16(v));
    for (int j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t i = 0; i < cols; ++i)
        s += static_cast<double>(wr[static_cast<size_t>(i)]) * from_bf16(to_bf16(x[j * cols + i]));
      y[j * rows + r] = static_cast<float>(s);
    }
  }
}

#if defined(__x86_64__)

namespace {

#define SS_BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16,f16c")))
#define SS_AMX_BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16,f16c,amx-tile,amx-bf16")))

bool cpu_has_avx512_bf16() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bf16");
}

bool amx_bf16_enabled() {
  static const bool ok = cpu_has_avx512_bf16() && cpu_has_amx_bf16() && amx_tiles_permitted();
  return ok;
}

// 32 floats as 32 bf16 in order (VCVTNE2PS2BF16: nearest even, subnormals to 0).
SS_BF16 inline void store_bf16x32(__m512 lo, __m512 hi, uint16_t* dst) {
  const __m512bh v = _mm512_cvtne2ps_pbh(hi, lo);
  std::memcpy(dst, &v, 64);
}

// Weight rows [rt, rt + 16) as bf16 A tiles, wt [nb][16][32]; rows from
// `end` on are 0.
SS_BF16 void convert_tile(const TensorView& w, int64_t rt, int64_t end, int64_t nb, uint16_t* wt) {
  for (int m = 0; m < 16; ++m) {
    uint16_t* dst = wt + m * 32;
    if (rt + m >= end) {
      for (int64_t b = 0; b < nb; ++b) std::memset(dst + b * 512, 0, 64);
      continue;
    }
    const uint8_t* row = w.row(rt + m);
    if (w.type == GgmlType::Q4_0) {
      const __m128i nib = _mm_set1_epi8(0x0F);
      for (int64_t b = 0; b < nb; ++b) {
        const uint8_t* blk = row + b * 18;
        uint16_t h;
        std::memcpy(&h, blk, 2);
        const float d = _cvtsh_ss(h);
        const __m512 dv = _mm512_set1_ps(d), off = _mm512_set1_ps(-8.0f * d);
        const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 2));
        const __m512 lo = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_and_si128(v, nib)));
        const __m512 hi = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_and_si128(_mm_srli_epi16(v, 4), nib)));
        // (q - 8) * d is exact, so the fused form rounds nothing.
        store_bf16x32(_mm512_fmadd_ps(lo, dv, off), _mm512_fmadd_ps(hi, dv, off), dst + b * 512);
      }
    } else {
      for (int64_t b = 0; b < nb; ++b) {
        const uint8_t* blk = row + b * 34;
        uint16_t h;
        std::memcpy(&h, blk, 2);
        const __m512 dv = _mm512_set1_ps(_cvtsh_ss(h));
        const __m512 lo =
            _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 2))));
        const __m512 hi =
            _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 18))));
        store_bf16x32(_mm512_mul_ps(lo, dv), _mm512_mul_ps(hi, dv), dst + b * 512);
      }
    }
  }
}

SS_BF16 void pack_acts_simd(const float* x, int n, int64_t cols, uint16_t* packed) {
  const int64_t nb = cols / 32;
  alignas(64) uint32_t pairs[16];
  for (int j = 0; j < n; ++j) {
    const int g = j / 16, r = j % 16;
    for (int64_t b = 0; b < nb; ++b) {
      const float* src = x + j * cols + b * 32;
      store_bf16x32(_mm512_loadu_ps(src), _mm512_loadu_ps(src + 16), reinterpret_cast<uint16_t*>(pairs));
      uint32_t* dst = reinterpret_cast<uint32_t*>(packed + (g * nb + b) * 512) + r;
      for (int kk = 0; kk < 16; ++kk) dst[kk * 16] = pairs[kk];
    }
  }
}

// C[16 weight rows][16 activation rows] float sums over the whole row: two
// weight tiles meet two activation groups per block of 32 (four products
// from four tile loads); nothing leaves the tiles until the row is done.
SS_AMX_BF16 void amx_bf16_matmul(const TensorView& w, const Bf16Acts& xb, float* y, int64_t r0, int64_t r1) {
  const int64_t nb = xb.blocks(), cols = xb.cols, rows = w.ne1, rb = static_cast<int64_t>(row_bytes(w.type, cols));
  // Tiles 0-3: C (16 x 16 float), tile 2 * wt + ag for weight tile wt and
  // activation group ag; 4, 5: A (16 weight rows x 32 bf16); 6, 7: B
  // (16 x (16 activations x 2 bf16)). All 16 rows x 64 bytes.
  TileConfig cfg;
  for (int tile = 0; tile < 8; ++tile) cfg.set(tile, 16, 64);
  _tile_loadconfig(&cfg);
  thread_local std::vector<uint16_t> wbuf;  // [2][nb][16][32]: block b's A tile is contiguous
  wbuf.resize(static_cast<size_t>(32 * cols));
  uint16_t* const wt[2] = {wbuf.data(), wbuf.data() + 16 * cols};
  alignas(64) float out[4][16][16];
  const int groups = (xb.n + 15) / 16, pairs = (groups + 1) / 2;
  for (int64_t rt = r0; rt < r1; rt += 32) {
    // A strip of 16 rows (the end of W or of this range) multiplies zeros
    // in its second tile rather than needing a second kernel.
    convert_tile(w, rt, r1, nb, wt[0]);
    convert_tile(w, rt + 16, r1, nb, wt[1]);
    // The next strip's weights come in from memory (into L2), a few cache
    // lines per block.
    const int64_t next_rows = std::min<int64_t>(32, r1 - (rt + 32));
    const uint8_t* next = next_rows > 0 ? w.row(rt + 32) : nullptr;
    const int64_t next_bytes = next_rows > 0 ? next_rows * rb : 0;
    const int lines_per_step = static_cast<int>((next_bytes / 64 + pairs * nb - 1) / (pairs * nb)) + 1;
    int64_t fetched = 0;
    for (int g = 0; g < groups; g += 2) {
      // An odd last group is paired with itself; its second products are
      // never written out.
      const int g1 = g + 1 < groups ? g + 1 : g;
      const uint16_t* bq0 = xb.packed.data() + g * nb * 512;
      const uint16_t* bq1 = xb.packed.data() + g1 * nb * 512;
      // GCC's tile intrinsics need literal tile numbers, hence no loops.
      _tile_zero(0);
      _tile_zero(1);
      _tile_zero(2);
      _tile_zero(3);
      for (int64_t b = 0; b < nb; ++b) {
        _tile_loadd(4, wt[0] + b * 512, 64);
        _tile_loadd(5, wt[1] + b * 512, 64);
        _tile_loadd(6, bq0 + b * 512, 64);
        _tile_loadd(7, bq1 + b * 512, 64);
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
        for (int k = 0; k < lines_per_step; ++k, fetched += 64)
          if (fetched < next_bytes) _mm_prefetch(reinterpret_cast<const char*>(next + fetched), _MM_HINT_T1);
      }
      _tile_stored(0, out[0], 64);
      _tile_stored(1, out[1], 64);
      _tile_stored(2, out[2], 64);
      _tile_stored(3, out[3], 64);
      for (int t = 0; t < 4; ++t) {
        if ((t & 1) && g1 == g) continue;
        const int ag = t & 1 ? g1 : g;
        const int na = std::min(16, xb.n - ag * 16);
        const int64_t row0 = rt + (t >> 1) * 16, nr = std::min<int64_t>(16, r1 - row0);
        for (int j = 0; j < na; ++j)
          for (int64_t m = 0; m < nr; ++m) y[(ag * 16 + j) * rows + row0 + m] = out[t][m][j];
      }
    }
  }
  _tile_release();
}

}  // namespace

void pack_acts_bf16(const float* x, int n, int64_t cols, Bf16Acts& out) {
  SS_CHECK(cols % 32 == 0 && n > 0);
  SS_CHECK(amx_bf16_enabled());
  out.n = n;
  out.cols = cols;
  const int groups = (n + 15) / 16;
  out.packed.assign(static_cast<size_t>(groups) * static_cast<size_t>(cols) * 16, 0);
  pack_acts_simd(x, n, cols, out.packed.data());
}

bool bf16_matmul_supported(const TensorView& w) { return bf16_type(w.type) && w.ne0 % 32 == 0 && amx_bf16_enabled(); }

void matmul_bf16_rows(const TensorView& w, const Bf16Acts& xb, float* y, int64_t r0, int64_t r1) {
  SS_CHECK(bf16_matmul_supported(w) && w.ne0 == xb.cols && r0 % 16 == 0);
  amx_bf16_matmul(w, xb, y, r0, r1);
}

#else

void pack_acts_bf16(const float*, int, int64_t, Bf16Acts&) { SS_CHECK(false && "no AMX-BF16 on this CPU"); }
bool bf16_matmul_supported(const TensorView&) { return false; }
void matmul_bf16_rows(const TensorView&, const Bf16Acts&, float*, int64_t, int64_t) {
  SS_CHECK(false && "no AMX-BF16 on this CPU");
}

#endif

}  // namespace ss
