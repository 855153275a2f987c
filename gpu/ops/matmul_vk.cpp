// SPDX-License-Identifier: MIT
// Matmul: few tokens by shaders/matmul_qa.comp (one workgroup per tile of 16
// rows and 4 tokens) or matmul_dense.comp (one per row and 4 tokens); many by
// matmul_tiled.comp (one per 64 rows and 32 tokens).
#include <algorithm>

#include "gpu/ops.h"
#include "gpu/pipeline.h"

namespace basalt::gpu {

namespace {
constexpr uint32_t kSlices = 16;  // K slices per workgroup (the shader's SLICES)
constexpr uint32_t kTokens = 4;   // tokens per workgroup (both shaders' TOK)
constexpr uint32_t kTiledRows = 64, kTiledTokens = 32;  // matmul_tiled.comp's TM, TN

struct Push {  // matmul_qa.comp
  uint32_t rows, cols, n_tok, tile0, x_offset, ldx, y_offset, ldy;
};
struct DensePush {  // matmul_dense.comp
  uint32_t rows, cols, n_tok, row0, row_words, x_offset, ldx, y_offset, ldy;
};
struct TiledPush {  // matmul_tiled.comp
  uint32_t rows, cols, n_tok, first, count, row_words, x_offset, ldx, y_offset, ldy;
};

uint32_t u32(int64_t v, const char* what) {
  if (v < 0 || v > UINT32_MAX) throw GpuError(std::string("matmul: ") + what + " out of range for the shader");
  return static_cast<uint32_t>(v);
}
}  // namespace

std::string matmul_shader(const Weight& w) {
  if (!w.input_perm.empty()) return "";
  if (w.format != WeightFormat::qa) {
    if (w.row_bytes % 4) return "";  // rows must start on 32-bit words
    if (w.format == WeightFormat::f32) return "matmul_f32";
    if (w.format == WeightFormat::f16) return "matmul_f16";
    if (w.format == WeightFormat::bf16) return "matmul_bf16";
    return "";
  }
  if (w.bits == 4 && w.scales == QaScales::f16_sym) return "matmul_q4_sym";
  if (w.bits == 4 && w.scales == QaScales::f16_affine) return "matmul_q4_affine";
  if (w.bits == 4 && w.scales == QaScales::f16_zero) return "matmul_q4_zero";
  if (w.bits == 8 && w.scales == QaScales::f16_sym) return "matmul_q8_sym";
  if (w.bits == 8 && w.scales == QaScales::f16_zero) return "matmul_q8_zero";
  if (w.bits == 4 && w.scales == QaScales::kquant) return "matmul_q4_kquant";
  if (w.bits == 5 && w.scales == QaScales::kquant) return "matmul_q5_kquant";
  if (w.bits == 6 && w.scales == QaScales::q6k) return "matmul_q6_q6k";
  return "";
}

GpuMatrix upload_matrix(Device& device, const Weight& w, size_t max_part_bytes) {
  GpuMatrix m;
  m.shader = matmul_shader(w);
  if (m.shader.empty()) throw GpuError("no GPU matmul for " + w.name + " (" + w.describe() + ")");
  m.rows = w.rows;
  m.cols = w.cols;
  m.mat_rows = w.mat_rows;
  m.dense = w.format != WeightFormat::qa;
  m.rows_per_tile = m.dense ? 1 : 16;  // dense "tiles" are rows
  m.tiles_per_mat = m.dense ? w.mat_rows : w.tiles_per_mat();
  m.tile_bytes = m.dense ? w.row_bytes : w.tile_bytes;
  // Whole tiles per buffer, within what one allocation and one binding may be.
  const GpuInfo& info = device.info();
  size_t limit = max_part_bytes ? max_part_bytes : info.max_storage_range;
  if (info.max_alloc_bytes) limit = std::min<size_t>(limit, info.max_alloc_bytes);
  const int64_t tiles = w.total_bytes() / m.tile_bytes, per_part = static_cast<int64_t>(limit / m.tile_bytes);
  if (per_part < 1)
    throw GpuError(w.name + ": one tile (" + std::to_string(m.tile_bytes) + " bytes) is more than one binding may span on " +
                   info.name, VK_ERROR_OUT_OF_DEVICE_MEMORY);
  for (int64_t t0 = 0; t0 < tiles; t0 += per_part) {
    const int64_t n = std::min(per_part, tiles - t0);
    const size_t bytes = static_cast<size_t>(n) * m.tile_bytes;
    m.parts.push_back({std::make_unique<Buffer>(device, bytes, Memory::device, "weights of " + w.name), t0, n});
    write_buffer(device, *m.parts.back().buffer, w.data + static_cast<size_t>(t0) * m.tile_bytes, bytes);
  }
  return m;
}

// One dispatch per buffer the matrix's tiles lie in: tiles [first, last) of
// the whole weight are rows (tile - mat's first tile) * rows_per_tile of the output.
void matmul(Device& device, Stream& stream, const MatmulOp& op) {
  const GpuMatrix& w = *op.w;
  const bool tiled = op.n_tok >= kTiledMatmulTokens;
  const Pipeline& pipe = tiled     ? device.pipeline({"matmul_tiled_" + w.shader.substr(7), 3, sizeof(TiledPush), {}})
                         : w.dense ? device.pipeline({w.shader, 3, sizeof(DensePush), {}})
                                   : device.pipeline({w.shader, 3, sizeof(Push), {kSlices}});
  const int64_t first = op.mat * w.tiles_per_mat, last = first + w.tiles_per_mat;
  for (const GpuMatrix::Part& part : w.parts) {
    const int64_t a = std::max(first, part.first_tile), b = std::min(last, part.first_tile + part.tiles);
    if (a >= b) continue;
    const int64_t row0 = (a - first) * w.rows_per_tile;
    const uint32_t rows = u32(w.mat_rows - row0, "rows"), cols = u32(w.cols, "cols"), n_tok = u32(op.n_tok, "tokens");
    const uint32_t unit = u32(a - part.first_tile, "tile"), x_offset = u32(op.x_offset, "x offset"),
                   ldx = u32(op.ldx, "ldx"), y_offset = u32(op.y_offset + row0, "y offset"), ldy = u32(op.ldy, "ldy");
    const std::initializer_list<Arg> bindings{in(*part.buffer), in(*op.x), out(*op.y)};
    if (tiled) {
      const int64_t part_rows = (b - a) * w.rows_per_tile;
      const TiledPush push{rows, cols, n_tok, unit, u32(b - a, "tiles"), u32(w.dense ? w.tile_bytes / 4 : 0, "row words"),
                           x_offset, ldx, y_offset, ldy};
      const Groups groups{u32((part_rows + kTiledRows - 1) / kTiledRows, "row groups"),
                          u32((op.n_tok + kTiledTokens - 1) / kTiledTokens, "token groups"), 1};
      stream.dispatch(pipe, bindings, &push, sizeof push, groups);
    } else if (w.dense) {
      const DensePush push{rows, cols, n_tok, unit, u32(w.tile_bytes / 4, "row words"), x_offset, ldx, y_offset, ldy};
      stream.dispatch(pipe, bindings, &push, sizeof push, {u32(b - a, "rows"), 1, u32((op.n_tok + kTokens - 1) / kTokens, "token groups")});
    } else {
      const Push push{rows, cols, n_tok, unit, x_offset, ldx, y_offset, ldy};
      stream.dispatch(pipe, bindings, &push, sizeof push, {u32(b - a, "tiles"), 1, u32((op.n_tok + kTokens - 1) / kTokens, "token groups")});
    }
  }
}

}  // namespace basalt::gpu
