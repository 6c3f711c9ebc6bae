#pragma once
// What the AMX kernels (int8 and bf16 tiles) share: the kernel's permission
// to use the tile state, and the tile configuration layout.
#include <cstdint>

namespace ss {

// The CPU has AMX tiles and Linux (5.16+) lets this process use them; asked
// once per process.
bool amx_tiles_permitted();
// CPU feature bits of CPUID leaf 7 (AMX-INT8, AMX-BF16).
bool cpu_has_amx_int8();
bool cpu_has_amx_bf16();

// LDTILECFG's 64-byte operand: palette 1, bytes per row and rows per tile.
struct TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};

  void set(int tile, int row_count, int bytes_per_row) {
    rows[tile] = static_cast<uint8_t>(row_count);
    colsb[tile] = static_cast<uint16_t>(bytes_per_row);
  }
};

}  // namespace ss
