// SPDX-License-Identifier: MIT
// The AMX int8 peak: tdpbusd on four independent 16 x 16 accumulators, full
// 64-byte rows of K. (The qa kernels multiply blocks of 32 columns, which the
// tile unit takes as long as 64: half this rate is their ceiling.)
#include <immintrin.h>

#include <cstdint>

#include "cpu/peaks.h"

namespace basalt::cpu {

namespace {
struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0, reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};
}  // namespace

int64_t int8_amx(int64_t rounds) {
  TileConfig c;
  for (int t = 0; t < 6; ++t) c.rows[t] = 16, c.colsb[t] = 64;
  _tile_loadconfig(&c);
  alignas(64) static const int8_t data[16 * 64] = {};
  _tile_loadd(4, data, 64);
  _tile_loadd(5, data, 64);
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  // A round is 1/8 of the four products (kComputeRounds of them take the 15-30 ms a pass wants).
  for (int64_t i = 0; i < rounds / 8; ++i) {
    _tile_dpbusd(0, 4, 5);
    _tile_dpbusd(1, 4, 5);
    _tile_dpbusd(2, 4, 5);
    _tile_dpbusd(3, 4, 5);
  }
  alignas(64) int32_t out[16 * 16];
  _tile_stored(0, out, 64);
  _tile_release();
  return out[0];
}

}  // namespace basalt::cpu
