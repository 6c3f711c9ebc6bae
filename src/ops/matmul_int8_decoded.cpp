#include "ops/matmul_int8_decoded.h"

#include <cstring>

#include "format/ggml_types.h"
#include "ops/act_groups.h"
#include "ops/interleave.h"
#include "ops/interleave_x86.h"
#include "util/aligned_vector.h"
#include "util/check.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include "ops/x86_intrinsics.h"
#endif

namespace ss {

bool decoded_batch_type(GgmlType t) {
  return t == GgmlType::Q4_0 || t == GgmlType::Q4_K || t == GgmlType::Q5_K || t == GgmlType::Q6_K;
}

#if defined(__x86_64__) && defined(__GNUC__)

#define SS_VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,f16c")))

namespace {

// One decoded block: 32 weights of the group's 16 rows.
//   [0, 64)     float dw[16]: row m's scale (Q4_0 d; Q4_K/Q5_K d * sc; Q6_K
//               d * sc of the block's first 16 weights);
//   [64, 128)   float aux[16]: Q4_K/Q5_K the min dmin * m, Q6_K the scale of
//               the last 16 weights;
//   [128, 640)  eight 64-byte chunks j, byte 4m + i: weight 4j + i of row m
//               as an unsigned byte (Q4_0 q + 8, Q4_K 0..15, Q5_K 0..31, Q6_K
//               v + 32 with v the signed 6-bit weight).
constexpr int64_t kDecBlockBytes = 640;
constexpr int kDecAux = 64, kDecChunks = 128;

// What sets a decoded block's weights apart, as the tile sees it.
enum class Decoded {
  kOffset8,  // Q4_0: w = dw * (q - 8)
  kMins,     // Q4_K, Q5_K: w = dw * q - aux
  kHalves,   // Q6_K: w = (dw, then aux) * (q - 32) per 16 weights
};

SS_VNNI inline void store(uint8_t* p, __m512i v) { _mm512_store_si512(reinterpret_cast<__m512i*>(p), v); }

SS_VNNI __m512 u8_to_ps(const uint8_t* p) {
  return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
}

SS_VNNI __m512 i8_to_ps(const uint8_t* p) {
  return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
}

SS_VNNI __m512 f16_to_ps(const uint8_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

// Q4_0 block j (288 bytes): chunk c's low nibbles are weights 4c.., its high
// ones 16 + 4c...
SS_VNNI void decode_q4_0(const uint8_t* group, int64_t nb, uint8_t* out) {
  const __m512i low = _mm512_set1_epi8(0x0F);
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* p = group + b * kInterleavedBlockBytes;
    uint8_t* o = out + b * kDecBlockBytes;
    _mm512_store_ps(o, f16_to_ps(p));
    for (int c = 0; c < 4; ++c) {
      const __m512i v = _mm512_loadu_si512(p + 32 + 64 * c);
      store(o + kDecChunks + 64 * c, _mm512_and_si512(v, low));
      store(o + kDecChunks + 64 * (4 + c), _mm512_and_si512(_mm512_srli_epi16(v, 4), low));
    }
  }
}

// One super-block's eight decoded blocks (o: the first) from 256 weights of
// 16 rows at `src`: U::chunk gives chunk c of blocks 2 * pair (lo) and
// 2 * pair + 1 (hi), U::scales block j's dw and aux.
template <class U>
SS_VNNI void decode_superblock(const uint8_t* src, uint8_t* o) {
  for (int j = 0; j < 8; ++j) {
    __m512 dw, aux;
    U::scales(src, j, dw, aux);
    _mm512_store_ps(o + j * kDecBlockBytes, dw);
    _mm512_store_ps(o + j * kDecBlockBytes + kDecAux, aux);
  }
  for (int pair = 0; pair < 4; ++pair) {
    uint8_t* lo_out = o + 2 * pair * kDecBlockBytes + kDecChunks;
    for (int c = 0; c < 8; ++c) {
      __m512i lo, hi;
      U::chunk(src, pair, c, lo, hi);
      store(lo_out + 64 * c, lo);
      store(lo_out + kDecBlockBytes + 64 * c, hi);
    }
  }
}

// Q4_K (Q5_K: kFive): pair p's chunk c holds chunk c of sub-block 2p (low
// nibbles) and of 2p + 1 (high); Q5_K's fifth bits as in
// interleaved_k45_tile (matmul_int8.cpp).
template <bool kFive>
struct K45Unpack {
  static constexpr int64_t kBytes = kFive ? kQ5KInterleavedBytes : kQ4KInterleavedBytes;
  SS_VNNI static void scales(const uint8_t* p, int j, __m512& dw, __m512& aux) {
    dw = _mm512_mul_ps(f16_to_ps(p), u8_to_ps(p + kQ4KIlScales + 16 * j));
    aux = _mm512_mul_ps(f16_to_ps(p + kQ4KIlDmin), u8_to_ps(p + kQ4KIlMins + 16 * j));
  }
  SS_VNNI static void chunk(const uint8_t* p, int pair, int c, __m512i& lo, __m512i& hi) {
    const __m512i low = _mm512_set1_epi8(0x0F);
    const uint8_t* pp = p + kQ4KIlNibbles + (kFive ? kQ5KIlPairBytes : kQ4KIlPairBytes) * pair;
    const __m512i v = _mm512_loadu_si512(pp + 64 * c);
    lo = _mm512_and_si512(v, low);
    hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), low);
    if constexpr (kFive) add_q5k_fifth_bits(_mm512_loadu_si512(pp + 512 + 64 * (c / 4)), c, lo, hi);
  }
};

// Q6_K: pair p's chunk c holds weight 64p + 4c.. whole (bits 0-5) and the
// top two bits of 64p + 32 + 4c.. (bits 6-7), whose low four bits are
// nibble c % 2 of high-nibble chunk c / 2. Block 2p takes sub-blocks 4p,
// 4p + 1 (scales dw, aux), block 2p + 1 sub-blocks 4p + 2, 4p + 3.
struct Q6KUnpack {
  static constexpr int64_t kBytes = kQ6KInterleavedBytes;
  SS_VNNI static void scales(const uint8_t* p, int j, __m512& dw, __m512& aux) {
    const __m512 d = f16_to_ps(p);
    dw = _mm512_mul_ps(d, i8_to_ps(p + kQ6KIlScales + 32 * j));
    aux = _mm512_mul_ps(d, i8_to_ps(p + kQ6KIlScales + 32 * j + 16));
  }
  SS_VNNI static void chunk(const uint8_t* p, int pair, int c, __m512i& lo, __m512i& hi) {
    const __m512i six = _mm512_set1_epi8(0x3F), low = _mm512_set1_epi8(0x0F), top = _mm512_set1_epi8(0x30);
    const uint8_t* pp = p + kQ6KIlPairs + kQ6KIlPairBytes * pair;
    const __m512i v = _mm512_loadu_si512(pp + q6k_il_chunk(c));
    const __m512i nib = _mm512_loadu_si512(pp + q6k_il_nibbles(c / 2));
    const __m512i nibble = _mm512_and_si512(c % 2 ? _mm512_srli_epi16(nib, 4) : nib, low);
    lo = _mm512_and_si512(v, six);
    hi = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(v, 2), top), nibble);
  }
};

template <class U>
SS_VNNI void decode_superblocks(const uint8_t* group, int64_t nb, uint8_t* out) {
  for (int64_t sb = 0; sb * 8 < nb; ++sb) decode_superblock<U>(group + sb * U::kBytes, out + sb * 8 * kDecBlockBytes);
}

// G decoded groups (16 rows each, `stride` bytes apart) against NT
// activation rows from t0: y[k * y_stride + 16u + m] for group u's row m.
// Per block, eight vpdpbusd per (group, activation row) and then its
// scaling; each activation broadcast feeds all G groups. The unsigned
// weights' offset comes back out through the activation sums (Q4_0 8, Q6_K
// 32 per half); Q6_K's halves keep separate integer sums (own scales).
template <Decoded K, int G, int NT>
SS_VNNI void decoded_tile(const uint8_t* dec, int64_t stride, const QuantizedActs& xq, int t0, float* y,
                          int64_t y_stride) {
  constexpr bool kHalves = K == Decoded::kHalves;
  const int64_t nb = xq.blocks(), cols = xq.cols;
  __m512 acc[G][NT];
  for (int u = 0; u < G; ++u)
    for (int k = 0; k < NT; ++k) acc[u][k] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* p[G];
    for (int u = 0; u < G; ++u) p[u] = dec + u * stride + b * kDecBlockBytes;
    __m512i d0[G][NT], d1[G][NT];
    for (int k = 0; k < NT; ++k) {
      const size_t a = static_cast<size_t>((t0 + k) * nb + b);
      __m512i init0 = _mm512_setzero_si512(), init1 = _mm512_setzero_si512();
      if constexpr (K == Decoded::kOffset8) init0 = _mm512_set1_epi32(-8 * xq.sum[a]);
      if constexpr (kHalves) {
        init0 = _mm512_set1_epi32(-32 * xq.sum16[2 * a]);
        init1 = _mm512_set1_epi32(-32 * xq.sum16[2 * a + 1]);
      }
      for (int u = 0; u < G; ++u) {
        d0[u][k] = init0;
        if constexpr (kHalves) d1[u][k] = init1;
      }
    }
    for (int c = 0; c < 8; ++c) {
      __m512i w[G];
      for (int u = 0; u < G; ++u) w[u] = _mm512_load_si512(p[u] + kDecChunks + 64 * c);
      for (int k = 0; k < NT; ++k) {
        int32_t x4;
        std::memcpy(&x4, xq.q.data() + (t0 + k) * cols + b * kActBlock + 4 * c, 4);
        const __m512i xb = _mm512_set1_epi32(x4);
        for (int u = 0; u < G; ++u) {
          if (kHalves && c >= 4)
            d1[u][k] = _mm512_dpbusd_epi32(d1[u][k], w[u], xb);
          else
            d0[u][k] = _mm512_dpbusd_epi32(d0[u][k], w[u], xb);
        }
      }
    }
    for (int u = 0; u < G; ++u) {
      const __m512 dw = _mm512_load_ps(p[u]);
      for (int k = 0; k < NT; ++k) {
        const size_t a = static_cast<size_t>((t0 + k) * nb + b);
        const __m512 dx = _mm512_set1_ps(xq.d[a]);
        if constexpr (K == Decoded::kMins)
          acc[u][k] = _mm512_fnmadd_ps(_mm512_load_ps(p[u] + kDecAux), _mm512_set1_ps(xq.dsum[a]), acc[u][k]);
        acc[u][k] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(d0[u][k]), _mm512_mul_ps(dw, dx), acc[u][k]);
        if constexpr (kHalves)
          acc[u][k] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(d1[u][k]), _mm512_mul_ps(_mm512_load_ps(p[u] + kDecAux), dx),
                                      acc[u][k]);
      }
    }
  }
  for (int u = 0; u < G; ++u)
    for (int k = 0; k < NT; ++k) _mm512_storeu_ps(y + k * y_stride + 16 * u, acc[u][k]);
}

template <Decoded K, int G>
SS_VNNI void decoded_groups(const uint8_t* dec, int64_t stride, const QuantizedActs& xq, float* y, int64_t rows) {
  // Two groups share each broadcast over four activation rows; one group
  // (the range's odd last) takes eight at a time.
  for_act_groups<G == 2 ? 4 : 8>(
      xq.n, [&](int t, auto nt) { decoded_tile<K, G, decltype(nt)::value>(dec, stride, xq, t, y + t * rows, rows); });
}

SS_VNNI void decode_group(GgmlType type, const uint8_t* group, int64_t nb, uint8_t* out) {
  switch (type) {
    case GgmlType::Q4_0:
      return decode_q4_0(group, nb, out);
    case GgmlType::Q4_K:
      return decode_superblocks<K45Unpack<false>>(group, nb, out);
    case GgmlType::Q5_K:
      return decode_superblocks<K45Unpack<true>>(group, nb, out);
    case GgmlType::Q6_K:
      return decode_superblocks<Q6KUnpack>(group, nb, out);
    default:
      SS_CHECK(false && "no decoded batch kernel for this type");
  }
}

template <Decoded K>
SS_VNNI void decoded_range(const TensorView& w, const QuantizedActs& xq, float* y, int64_t r0, int64_t r1) {
  const int64_t nb = xq.blocks(), rows = w.ne1, stride = nb * kDecBlockBytes;
  // [2][nb][640]: the two groups a pass reads, unpacked.
  thread_local AlignedVector<uint8_t> buf;
  if (buf.size() < static_cast<size_t>(2 * stride)) buf.resize(static_cast<size_t>(2 * stride));
  for (int64_t g = r0 / kInterleaveRows; g * kInterleaveRows < r1;) {
    const bool two = (g + 2) * kInterleaveRows <= r1;
    for (int u = 0; u < (two ? 2 : 1); ++u)
      decode_group(w.type, rows_begin(w, (g + u) * kInterleaveRows), nb, buf.data() + u * stride);
    float* yg = y + g * kInterleaveRows;
    if (two)
      decoded_groups<K, 2>(buf.data(), stride, xq, yg, rows);
    else
      decoded_groups<K, 1>(buf.data(), stride, xq, yg, rows);
    g += two ? 2 : 1;
  }
}

}  // namespace

void decoded_batch_matmul(const TensorView& w, const QuantizedActs& xq, float* y, int64_t r0, int64_t r1) {
  SS_CHECK(w.interleaved != nullptr && decoded_batch_type(w.type));
  switch (w.type) {
    case GgmlType::Q4_0:
      return decoded_range<Decoded::kOffset8>(w, xq, y, r0, r1);
    case GgmlType::Q6_K:
      return decoded_range<Decoded::kHalves>(w, xq, y, r0, r1);
    default:
      return decoded_range<Decoded::kMins>(w, xq, y, r0, r1);
  }
}

#else

void decoded_batch_matmul(const TensorView&, const QuantizedActs&, float*, int64_t, int64_t) {
  SS_CHECK(false && "decoded batches need x86-64 with AVX-512 VNNI");
}

#endif

}  // namespace ss
