#include "ops/interleave.h"

#include <cstring>

#include "util/check.h"

namespace ss {

namespace {
// Bytes of one group of 16 rows.
int64_t group_bytes(const TensorView& w) {
  switch (w.type) {
    case GgmlType::Q4_K:
      return w.ne0 / kQkK * kQ4KInterleavedBytes;
    case GgmlType::Q5_K:
      return w.ne0 / kQkK * kQ5KInterleavedBytes;
    case GgmlType::Q6_K:
      return w.ne0 / kQkK * kQ6KInterleavedBytes;
    case GgmlType::Q8_0:
      return w.ne0 / 32 * kQ8InterleavedBlockBytes;
    default:
      return w.ne0 / 32 * kInterleavedBlockBytes;
  }
}

// f(blk, dst, m) for every block of every row of W: blk the block in the
// row's own bytes, dst the interleaved block that holds it with its group's
// 15 other rows, m the row within the group. out is zeroed first, since some
// layouts or bits in.
template <class F>
void for_each_block(const TensorView& w, uint8_t* out, F&& f) {
  const int64_t elems = type_traits(static_cast<uint32_t>(w.type))->block_elems, nb = w.ne0 / elems;
  const int64_t groups = w.ne1 / kInterleaveRows, il_bytes = group_bytes(w) / nb;
  const size_t bytes = row_bytes(w.type, elems);
  std::memset(out, 0, static_cast<size_t>(groups * nb * il_bytes));
  for (int64_t g = 0; g < groups; ++g)
    for (int m = 0; m < kInterleaveRows; ++m) {
      const uint8_t* row = w.row(g * kInterleaveRows + m);
      for (int64_t b = 0; b < nb; ++b) f(row + b * bytes, out + (g * nb + b) * il_bytes, m);
    }
}

void interleave_q8_0(const TensorView& w, uint8_t* out) {
  for_each_block(w, out, [](const uint8_t* blk, uint8_t* dst, int m) {
    std::memcpy(dst + 2 * m, blk, 2);
    for (int e = 0; e < 32; ++e) dst[32 + 64 * (e / 4) + 4 * m + e % 4] = blk[2 + e] ^ 0x80;
  });
}

void interleave_q4_0(const TensorView& w, uint8_t* out) {
  for_each_block(w, out, [](const uint8_t* blk, uint8_t* dst, int m) {
    std::memcpy(dst + 2 * m, blk, 2);
    for (int j = 0; j < 4; ++j) std::memcpy(dst + 32 + 64 * j + 4 * m, blk + 2 + 4 * j, 4);
  });
}

// Q4_K, or Q5_K (five).
void interleave_k45(const TensorView& w, bool five, uint8_t* out) {
  const int pair_bytes = five ? kQ5KIlPairBytes : kQ4KIlPairBytes;
  for_each_block(w, out, [&](const uint8_t* blk, uint8_t* dst, int m) {
    const uint8_t* qh = blk + 16;                // Q5_K: bit j of qh[l] is weight l of sub-block j's fifth
    const uint8_t* qs = blk + (five ? 48 : 16);  // nibbles
    std::memcpy(dst + 2 * m, blk, 2);
    std::memcpy(dst + kQ4KIlDmin + 2 * m, blk + 2, 2);
    uint8_t sc[8], mn[8];
    kquant_scales_mins(blk + 4, sc, mn);
    for (int j = 0; j < 8; ++j) {
      dst[kQ4KIlScales + 16 * j + m] = sc[j];
      dst[kQ4KIlMins + 16 * j + m] = mn[j];
    }
    for (int p = 0; p < 4; ++p) {
      uint8_t* pair = dst + kQ4KIlNibbles + pair_bytes * p;
      for (int c = 0; c < 8; ++c) {
        std::memcpy(pair + 64 * c + 4 * m, qs + 32 * p + 4 * c, 4);
        for (int i = 0; five && i < 4; ++i) {
          const int l = 4 * c + i, bits = (qh[l] >> (2 * p)) & 3;  // sub-blocks 2p, 2p + 1
          pair[512 + 64 * (c / 4) + 4 * m + i] |= static_cast<uint8_t>(bits << (2 * (c % 4)));
        }
      }
    }
  });
}

// A Q6_K super-block's 256 weights as unsigned 6-bit values v (weight = d *
// scale * (v - 32)), in order: per half h of 128, weight l (< 32) of quarter
// q takes its low nibble from ql byte 64h + l (+ 32 for quarters 1, 3; high
// nibble for 2, 3) and two high bits from qh byte 32h + l, shifted by 2q.
void q6k_values(const uint8_t* blk, uint8_t* v) {
  for (int h = 0; h < 2; ++h) {
    const uint8_t* ql = blk + 64 * h;
    const uint8_t* qh = blk + 128 + 32 * h;
    uint8_t* out = v + 128 * h;
    for (int l = 0; l < 32; ++l) {
      out[l] = static_cast<uint8_t>((ql[l] & 15) | (qh[l] & 3) << 4);
      out[l + 32] = static_cast<uint8_t>((ql[l + 32] & 15) | ((qh[l] >> 2) & 3) << 4);
      out[l + 64] = static_cast<uint8_t>((ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4);
      out[l + 96] = static_cast<uint8_t>((ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4);
    }
  }
}

void interleave_q6_k(const TensorView& w, uint8_t* out) {
  for_each_block(w, out, [](const uint8_t* blk, uint8_t* dst, int m) {
    uint8_t v[256];
    q6k_values(blk, v);
    std::memcpy(dst + 2 * m, blk + 208, 2);
    for (int j = 0; j < 16; ++j) dst[kQ6KIlScales + 16 * j + m] = blk[192 + j];
    for (int p = 0; p < 4; ++p) {
      uint8_t* pair = dst + kQ6KIlPairs + kQ6KIlPairBytes * p;
      for (int c = 0; c < 8; ++c)
        for (int i = 0; i < 4; ++i) {
          const int lo = v[64 * p + 4 * c + i], hi = v[64 * p + 32 + 4 * c + i];
          pair[q6k_il_chunk(c) + 4 * m + i] = static_cast<uint8_t>(lo | (hi >> 4) << 6);
          pair[q6k_il_nibbles(c / 2) + 4 * m + i] |= static_cast<uint8_t>((hi & 15) << (4 * (c % 2)));
        }
    }
  });
}
}  // namespace

bool can_interleave(const TensorView& w) {
  if (w.ne1 <= 0 || w.ne1 % kInterleaveRows != 0) return false;
  if (w.type == GgmlType::Q4_0 || w.type == GgmlType::Q8_0) return w.ne0 % 32 == 0;
  return (w.type == GgmlType::Q4_K || w.type == GgmlType::Q5_K || w.type == GgmlType::Q6_K) && w.ne0 % kQkK == 0;
}

size_t interleaved_bytes(const TensorView& w) { return static_cast<size_t>(w.ne1 / kInterleaveRows * group_bytes(w)); }

void interleave(const TensorView& w, uint8_t* out) {
  SS_CHECK(can_interleave(w));
  if (w.type == GgmlType::Q4_K || w.type == GgmlType::Q5_K) return interleave_k45(w, w.type == GgmlType::Q5_K, out);
  if (w.type == GgmlType::Q8_0) return interleave_q8_0(w, out);
  if (w.type == GgmlType::Q6_K) return interleave_q6_k(w, out);
  interleave_q4_0(w, out);
}

const uint8_t* rows_begin(const TensorView& w, int64_t r) {
  if (w.interleaved == nullptr) return w.row(r);
  SS_CHECK(r % kInterleaveRows == 0);
  return static_cast<const uint8_t*>(w.interleaved) + (r / kInterleaveRows) * group_bytes(w);
}

}  // namespace ss
