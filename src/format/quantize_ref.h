#pragma once
// Block quantizers that choose scales as ggml's reference quantizers do
// (quantize_row_*_ref, what llama.cpp's `quantize` runs without an
// importance matrix), so a file we quantize has ggml's quality: Q4_K/Q5_K
// search 20/15 candidate scales per sub-block with a weighted least-squares
// fit of scale and min, Q6_K searches 19 candidate scales per 16 weights.
// Each takes one block of floats and writes one block of bytes.
#include <cstdint>

namespace ss {

// Q4_K (five = false) or Q5_K (five = true): 256 floats -> 144 / 176 bytes.
void quantize_block_k45(const float* x, bool five, uint8_t* blk);
// Q6_K: 256 floats -> 210 bytes.
void quantize_block_q6_k(const float* x, uint8_t* blk);
// Q5_0 (d, 32 fifth bits, nibbles; values d * (q - 16)): 32 floats -> 22 bytes.
void quantize_block_q5_0(const float* x, uint8_t* blk);
// Q5_1 (d, m, fifth bits, nibbles; values d * q + m): 32 floats -> 24 bytes.
void quantize_block_q5_1(const float* x, uint8_t* blk);

}  // namespace ss
