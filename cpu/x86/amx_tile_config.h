// SPDX-License-Identifier: MIT
// The 64-byte operand of ldtilecfg (palette 1): each tile's rows and bytes
// per row. For the AMX kernels (matmul_qa_amx.cpp, attention_amx.cpp).
#pragma once

#include <cstdint>

namespace basalt::kernels {

struct alignas(64) AmxTileConfig {
  uint8_t palette = 1, start_row = 0, reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

}  // namespace basalt::kernels
