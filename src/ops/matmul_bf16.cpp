#include "ops/matmul_bf16.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "format/ggml_types.h"
#include "ops/amx.h"
#include "ops/interleave.h"
#include "ops/interleave_x86.h"
#include "ops/transpose_x86.h"
#include "util/check.h"
#include "util/cpu_features.h"
#include "util/fp16.h"

#if defined(__x86_64__)
#include "ops/x86_intrinsics.h"
#endif

namespace ss {

uint16_t to_bf16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  if ((u & 0x7F800000u) == 0) return static_cast<uint16_t>((u >> 16) & 0x8000u);  // zero, subnormal: signed 0
  return fp32_to_bf16(x);
}

namespace {
bool bf16_type(GgmlType t) { return t == GgmlType::Q4_0 || t == GgmlType::Q8_0; }
}  // namespace

void matmul_bf16_reference(const TensorView& w, const float* x, int n, float* y) {
  SS_CHECK(bf16_type(w.type) && w.ne0 % 32 == 0);
  const int64_t cols = w.ne0, rows = w.ne1;
  std::vector<float> wr(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    dequantize_row(w.type, w.row(r), wr.data(), cols);  // exact: d * q needs at most 18 significant bits
    for (auto& v : wr) v = bf16_to_fp32(to_bf16(v));
    for (int j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t i = 0; i < cols; ++i)
        s += static_cast<double>(wr[static_cast<size_t>(i)]) * bf16_to_fp32(to_bf16(x[j * cols + i]));
      y[j * rows + r] = static_cast<float>(s);
    }
  }
}

#if defined(__x86_64__)

namespace {

#define SS_BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16,f16c")))
#define SS_AMX_BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16,f16c,amx-tile,amx-bf16")))

// 32 floats as 32 bf16 in order (VCVTNE2PS2BF16: nearest even, subnormals to 0).
SS_BF16 inline void store_bf16x32(__m512 lo, __m512 hi, uint16_t* dst) {
  const __m512bh v = _mm512_cvtne2ps_pbh(hi, lo);
  std::memcpy(dst, &v, 64);
}

// One interleaved Q4_0 block (16 rows x 32 weights at p, ops/interleave.h)
// as a bf16 A tile wt [16][32]. Each row's 16 possible values d * (q - 8)
// (exact in float, rounded once: what converting every weight would give)
// make a lookup table, two rows' to a register; the packed nibbles are
// transposed to rows (a dword transpose of the four chunks: half the data
// of the unpacked weights) and looked up 32 at a time.
SS_BF16 inline void interleaved_block_bf16(const uint8_t* p, uint16_t* wt) {
  alignas(64) float d[16];
  _mm512_store_ps(d, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))));
  const __m512 q_minus_8 = _mm512_setr_ps(-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7);
  __m512i table[8];  // rows 2i (words 0-15) and 2i + 1 (words 16-31)
  for (int i = 0; i < 8; ++i) {
    const __m512bh t = _mm512_cvtne2ps_pbh(_mm512_mul_ps(q_minus_8, _mm512_set1_ps(d[2 * i + 1])),
                                           _mm512_mul_ps(q_minus_8, _mm512_set1_ps(d[2 * i])));
    std::memcpy(&table[i], &t, 64);
  }
  const __m512i c0 = _mm512_loadu_si512(p + 32), c1 = _mm512_loadu_si512(p + 96), c2 = _mm512_loadu_si512(p + 160),
                c3 = _mm512_loadu_si512(p + 224);  // chunk j, dword m: row m's bytes 4j..4j+3
  const __m512i t0 = _mm512_unpacklo_epi32(c0, c1), t1 = _mm512_unpackhi_epi32(c0, c1);
  const __m512i t2 = _mm512_unpacklo_epi32(c2, c3), t3 = _mm512_unpackhi_epi32(c2, c3);
  // u[c], 128-bit lane L: row 4L + c's 16 bytes (weight i low nibble, i + 16 high).
  const __m512i u[4] = {_mm512_unpacklo_epi64(t0, t2), _mm512_unpackhi_epi64(t0, t2), _mm512_unpacklo_epi64(t1, t3),
                        _mm512_unpackhi_epi64(t1, t3)};
  const __m512i nib = _mm512_set1_epi8(0x0F), odd_row = _mm512_set1_epi8(0x10);
  const __m512i lanes_01 = _mm512_setr_epi64(0, 1, 8, 9, 2, 3, 10, 11),
                lanes_23 = _mm512_setr_epi64(4, 5, 12, 13, 6, 7, 14, 15);
  // Row 4L + c's 32 table indices at idx[c][L]: low nibbles, then high ones,
  // + 16 for odd rows (the upper half of their pair's table).
  alignas(64) uint8_t idx[4][4][32];
  for (int c = 0; c < 4; ++c) {
    __m512i lo = _mm512_and_si512(u[c], nib), hi = _mm512_and_si512(_mm512_srli_epi16(u[c], 4), nib);
    if (c & 1) {
      lo = _mm512_or_si512(lo, odd_row);
      hi = _mm512_or_si512(hi, odd_row);
    }
    _mm512_store_si512(idx[c][0], _mm512_permutex2var_epi64(lo, lanes_01, hi));
    _mm512_store_si512(idx[c][2], _mm512_permutex2var_epi64(lo, lanes_23, hi));
  }
  // Widen the indices from L1 (the load ports) rather than from registers
  // (the shuffle port this loop is short of).
  asm volatile("" ::: "memory");
  for (int m = 0; m < 16; ++m) {
    const __m512i ix = _mm512_cvtepu8_epi16(_mm256_load_si256(reinterpret_cast<const __m256i*>(idx[m & 3][m >> 2])));
    _mm512_store_si512(wt + m * 32, _mm512_permutexvar_epi16(ix, table[m >> 1]));
  }
}

// A Q8_0 block's 32 weights d * q (exact in float), rounded once to bf16.
SS_BF16 inline void q8_block_bf16(const int8_t* q, float d, uint16_t* dst) {
  const __m512 dv = _mm512_set1_ps(d);
  const __m512 lo = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q))));
  const __m512 hi = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q + 16))));
  store_bf16x32(_mm512_mul_ps(lo, dv), _mm512_mul_ps(hi, dv), dst);
}

// One interleaved Q8_0 block (544 bytes at p) as a bf16 A tile wt [16][32]:
// rows back from the chunks, then each as from plain rows.
SS_BF16 inline void interleaved_q8_block_bf16(const uint8_t* p, uint16_t* wt) {
  alignas(64) int8_t q[16][32];
  alignas(64) float d[16];
  interleaved_q8_block_rows(p, &q[0][0], d);
  for (int m = 0; m < 16; ++m) q8_block_bf16(q[m], d[m], wt + m * 32);
}

// bf16_tile_rows (matmul_bf16.h).
SS_BF16 void convert_tile(const TensorView& w, int64_t rt, int64_t end, int64_t k0, int64_t kn, uint16_t* wt) {
  if (tiles_read_interleaved(w) && rt + 16 <= end) {  // end is a whole group's
    const uint8_t* group = rows_begin(w, rt);
    if (w.type == GgmlType::Q4_0) {
      for (int64_t b = 0; b < kn; ++b) interleaved_block_bf16(group + (k0 + b) * kInterleavedBlockBytes, wt + b * 512);
      return;
    }
    for (int64_t b = 0; b < kn; ++b)
      interleaved_q8_block_bf16(group + (k0 + b) * kQ8InterleavedBlockBytes, wt + b * 512);
    return;
  }
  for (int m = 0; m < 16; ++m) {
    uint16_t* dst = wt + m * 32;
    if (rt + m >= end) {
      for (int64_t b = 0; b < kn; ++b) std::memset(dst + b * 512, 0, 64);
      continue;
    }
    if (w.type == GgmlType::Q4_0) {
      const uint8_t* blocks = w.row(rt + m) + k0 * kQ4_0Bytes;  // [kn][kQ4_0Bytes]
      // The block's 16 possible values d * (q - 8) (exact in float), rounded
      // once, then looked up per nibble: [lo nibbles | hi nibbles] is the
      // block's element order.
      const __m512 q_minus_8 = _mm512_setr_ps(-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7);
      const __m256i nib = _mm256_set1_epi8(0x0F);
      for (int64_t b = 0; b < kn; ++b) {
        const uint8_t* blk = blocks + b * kQ4_0Bytes;
        uint16_t h;
        std::memcpy(&h, blk, 2);
        const __m256bh table16 = _mm512_cvtneps_pbh(_mm512_mul_ps(q_minus_8, _mm512_set1_ps(_cvtsh_ss(h))));
        __m256i t;
        std::memcpy(&t, &table16, 32);
        const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 2));
        const __m256i idx8 =
            _mm256_and_si256(_mm256_inserti128_si256(_mm256_castsi128_si256(v), _mm_srli_epi16(v, 4), 1), nib);
        const __m512i vals = _mm512_permutexvar_epi16(_mm512_cvtepu8_epi16(idx8), _mm512_castsi256_si512(t));
        _mm512_storeu_si512(dst + b * 512, vals);
      }
    } else {
      const uint8_t* row = w.row(rt + m);
      for (int64_t b = 0; b < kn; ++b) {
        const uint8_t* blk = row + (k0 + b) * 34;
        uint16_t h;
        std::memcpy(&h, blk, 2);
        q8_block_bf16(reinterpret_cast<const int8_t*>(blk + 2), _cvtsh_ss(h), dst + b * 512);
      }
    }
  }
}

// Per group of 16 rows and block of 32 columns: each row's 32 bf16 as 16
// dwords (pairs), the 16 x 16 dwords transposed to the [k/2][row][2] tile.
SS_BF16 void pack_acts_simd(const float* x, int n, int64_t cols, uint16_t* packed) {
  const int64_t nb = cols / 32;
  const int groups = (n + 15) / 16;
  for (int g = 0; g < groups; ++g) {
    const int rows = std::min(16, n - g * 16);
    for (int64_t b = 0; b < nb; ++b) {
      __m512i r[16];
      for (int j = 0; j < 16; ++j) {
        if (j >= rows) {
          r[j] = _mm512_setzero_si512();
          continue;
        }
        const float* src = x + (g * 16 + j) * cols + b * 32;
        const __m512bh v = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(src + 16), _mm512_loadu_ps(src));
        std::memcpy(&r[j], &v, 64);
      }
      transpose_16x16_epi32(r);
      uint16_t* dst = packed + (g * nb + b) * 512;
      for (int kk = 0; kk < 16; ++kk) _mm512_store_si512(dst + kk * 32, r[kk]);
    }
  }
}

// C[16 weight rows][16 activation rows] float sums: two weight tiles meet
// two activation groups per block of 32 (four products from four tile
// loads). Tile loads from L2 set the pace (about 19 ns a product here against
// 7 from L1), so the weights are converted a chunk of kChunk blocks at a
// time into a buffer that stays in L1 for every activation group, and the
// sums wait in L1 between chunks.
constexpr int kChunk = 8;

SS_AMX_BF16 void amx_bf16_matmul(const TensorView& w, const Bf16Acts& xb, float* y, int64_t r0, int64_t r1) {
  const int64_t nb = xb.blocks(), rows = w.ne1;
  // Tiles 0-3: C (16 x 16 float), tile 2 * wt + ag for weight tile wt and
  // activation group ag; 4, 5: A (16 weight rows x 32 bf16); 6, 7: B
  // (16 x (16 activations x 2 bf16)). All 16 rows x 64 bytes.
  TileConfig cfg;
  for (int tile = 0; tile < 8; ++tile) cfg.set(tile, 16, 64);
  _tile_loadconfig(&cfg);
  alignas(64) uint16_t wt[2][kChunk][16][32];  // a chunk of both weight tiles
  const int groups = (xb.n + 15) / 16, pairs = (groups + 1) / 2;
  thread_local AlignedVector<float> sums;  // [pairs][4][16][16]
  sums.resize(static_cast<size_t>(pairs) * 1024);
  for (int64_t rt = r0; rt < r1; rt += 32) {
    StripPrefetch prefetch(w, rt, r1, static_cast<int64_t>(pairs) * nb);  // the next strip, while this one works
    for (int64_t k0 = 0; k0 < nb; k0 += kChunk) {
      const int64_t kn = std::min<int64_t>(kChunk, nb - k0);
      // A strip of 16 rows (the end of W or of this range) multiplies zeros
      // in its second tile rather than needing a second kernel.
      convert_tile(w, rt, r1, k0, kn, &wt[0][0][0][0]);
      convert_tile(w, rt + 16, r1, k0, kn, &wt[1][0][0][0]);
      for (int p = 0; p < pairs; ++p) {
        // An odd last group is paired with itself; its second products are
        // never written out.
        const int g = 2 * p, g1 = g + 1 < groups ? g + 1 : g;
        const uint16_t* bq0 = xb.packed.data() + (g * nb + k0) * 512;
        const uint16_t* bq1 = xb.packed.data() + (g1 * nb + k0) * 512;
        float* s = sums.data() + p * 1024;
        // GCC's tile intrinsics need literal tile numbers, hence no loops.
        if (k0 == 0) {
          _tile_zero(0);
          _tile_zero(1);
          _tile_zero(2);
          _tile_zero(3);
        } else {
          _tile_loadd(0, s, 64);
          _tile_loadd(1, s + 256, 64);
          _tile_loadd(2, s + 512, 64);
          _tile_loadd(3, s + 768, 64);
        }
        for (int64_t b = 0; b < kn; ++b) {
          _tile_loadd(4, wt[0][b], 64);
          _tile_loadd(5, wt[1][b], 64);
          _tile_loadd(6, bq0 + b * 512, 64);
          _tile_loadd(7, bq1 + b * 512, 64);
          _tile_dpbf16ps(0, 4, 6);
          _tile_dpbf16ps(1, 4, 7);
          _tile_dpbf16ps(2, 5, 6);
          _tile_dpbf16ps(3, 5, 7);
          prefetch.step();
        }
        _tile_stored(0, s, 64);
        _tile_stored(1, s + 256, 64);
        _tile_stored(2, s + 512, 64);
        _tile_stored(3, s + 768, 64);
      }
    }
    for (int p = 0; p < pairs; ++p) {
      const int g = 2 * p, g1 = g + 1 < groups ? g + 1 : g;
      store_strip_sums(reinterpret_cast<const float(*)[16][16]>(sums.data() + p * 1024), g, g1, xb.n, rt, r1, rows, y);
    }
  }
  _tile_release();
}

}  // namespace

void pack_acts_bf16(const float* x, int n, int64_t cols, Bf16Acts& out) {
  SS_CHECK(cols % 32 == 0 && n > 0);
  SS_CHECK(bf16_tiles_usable());
  out.n = n;
  out.cols = cols;
  const int groups = (n + 15) / 16;
  out.packed.resize(static_cast<size_t>(groups) * static_cast<size_t>(cols) * 16);  // every element written below
  pack_acts_simd(x, n, cols, out.packed.data());
}

// Asked at every call, so a changed cap (util/cpu_features.h) takes effect.
bool bf16_tiles_usable() { return cpu_usable(kCpuAmxBf16) && cpu_usable(kCpuAvx512Bf16); }
bool bf16_matmul_supported(const TensorView& w) { return bf16_type(w.type) && w.ne0 % 32 == 0 && bf16_tiles_usable(); }

void matmul_bf16_rows(const TensorView& w, const Bf16Acts& xb, float* y, int64_t r0, int64_t r1) {
  SS_CHECK(bf16_matmul_supported(w) && w.ne0 == xb.cols && r0 % 16 == 0);
  amx_bf16_matmul(w, xb, y, r0, r1);
}

void bf16_tile_rows(const TensorView& w, int64_t rt, int64_t end, int64_t k0, int64_t kn, uint16_t* wt) {
  SS_CHECK(bf16_type(w.type) && cpu_usable(kCpuAvx512Bf16));
  convert_tile(w, rt, end, k0, kn, wt);
}

#else

void pack_acts_bf16(const float*, int, int64_t, Bf16Acts&) { SS_CHECK(false && "no AMX-BF16 on this CPU"); }
bool bf16_tiles_usable() { return false; }
bool bf16_matmul_supported(const TensorView&) { return false; }
void matmul_bf16_rows(const TensorView&, const Bf16Acts&, float*, int64_t, int64_t) {
  SS_CHECK(false && "no AMX-BF16 on this CPU");
}
void bf16_tile_rows(const TensorView&, int64_t, int64_t, int64_t, int64_t, uint16_t*) {
  SS_CHECK(false && "no AVX-512 BF16 on this CPU");
}

#endif

}  // namespace ss
