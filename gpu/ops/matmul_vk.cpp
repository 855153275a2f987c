// SPDX-License-Identifier: MIT
// Matmul: few tokens by shaders/matmul_qa.comp (one workgroup per tile of 16
// rows and 4 tokens) or matmul_dense.comp (one per row and 4 tokens); many by
// matmul_tiled.comp (one per 64 rows and 32 tokens). The grouped forms run
// all of a MoE layer's experts in one dispatch (shaders/matmul_params.glsl).
#include <algorithm>

#include "gpu/ops.h"
#include "gpu/pipeline.h"

namespace basalt::gpu {

namespace {
constexpr uint32_t kTokens = 4;   // tokens per workgroup (both shaders' TOK)
constexpr uint32_t kTiledRows = 64, kTiledTokens = 32;  // matmul_tiled.comp's TM, TN

struct Push {  // matmul_params.glsl, shared by the three shaders
  uint32_t rows, cols, n_tok, first, count, row_words, x_offset, ldx, y_offset, ldy, units_per_mat, n_expert, gather;
};

uint32_t u32(int64_t v, const char* what) {
  if (v < 0 || v > UINT32_MAX) throw GpuError(std::string("matmul: ") + what + " out of range for the shader");
  return static_cast<uint32_t>(v);
}

// The dispatch's grid: x over row_units units (tiles or dense rows; the
// tiled GEMM takes 64 rows a workgroup), y over the tokens, z over experts.
Groups grid(const GpuMatrix& w, bool tiled, int64_t n_tok, uint32_t row_units, uint32_t experts) {
  const int64_t per = tiled ? kTiledTokens : kTokens;
  if (tiled) row_units = u32((row_units * w.rows_per_tile + kTiledRows - 1) / kTiledRows, "row groups");
  return {row_units, u32((n_tok + per - 1) / per, "token groups"), experts};
}

// The tiled GEMM's variant: for qa weights, integer dot products where the
// device has them, else f16 arithmetic where it has that; f16 weights, f16
// arithmetic; the rest (and the GEMV) f32.
const char* tiled_variant(const Device& device, const GpuMatrix& w) {
  if (!w.dense && device.integer_dot()) return "matmul_tiled_dot_";
  if ((!w.dense || w.shader == "matmul_f16") && device.float16_arith()) return "matmul_tiled_fp16_";
  return "matmul_tiled_";
}

const Pipeline& matmul_pipeline(Device& device, const GpuMatrix& w, bool tiled, bool grouped) {
  const std::string format = w.shader.substr(7);  // after "matmul_"
  const std::string name = std::string(tiled ? tiled_variant(device, w) : "matmul_") + (grouped ? "grouped_" : "") + format;
  return device.pipeline({name, grouped ? 4u : 3u, sizeof(Push), {}});
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
  if (w.bits == 5 && w.scales == QaScales::f16_affine) return "matmul_q5_affine";
  if (w.bits == 8 && w.scales == QaScales::f16_sym) return "matmul_q8_sym";
  if (w.bits == 8 && w.scales == QaScales::f16_zero) return "matmul_q8_zero";
  if (w.bits == 4 && w.scales == QaScales::kquant) return "matmul_q4_kquant";
  if (w.bits == 5 && w.scales == QaScales::kquant) return "matmul_q5_kquant";
  if (w.bits == 6 && w.scales == QaScales::q6k) return "matmul_q6_q6k";
  return "";
}

GpuMatrix upload_matrix(Device& device, const Weight& w, size_t max_part_bytes, Uploader* uploader) {
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
  std::unique_ptr<Uploader> own = uploader ? nullptr : std::make_unique<Uploader>(device);
  Uploader& up = uploader ? *uploader : *own;
  try {
    for (int64_t t0 = 0; t0 < tiles; t0 += per_part) {
      const int64_t n = std::min(per_part, tiles - t0);
      const size_t bytes = static_cast<size_t>(n) * m.tile_bytes;
      m.parts.push_back({std::make_unique<Buffer>(device, bytes, Memory::device, "weights of " + w.name), t0, n});
      up.write(*m.parts.back().buffer, w.data + static_cast<size_t>(t0) * m.tile_bytes, bytes);
    }
  } catch (const GpuError&) {
    up.finish();  // before m's buffers go: no copy may still target them
    throw;
  }
  if (own) own->finish();
  return m;
}

// One dispatch per buffer the matrix's tiles lie in: tiles [first, last) of
// the whole weight are rows (tile - mat's first tile) * rows_per_tile of the output.
void matmul(Device& device, Stream& stream, const MatmulOp& op) {
  const GpuMatrix& w = *op.w;
  const bool tiled = op.n_tok >= kTiledMatmulTokens;
  const Pipeline& pipe = matmul_pipeline(device, w, tiled, false);
  const int64_t first = op.mat * w.tiles_per_mat, last = first + w.tiles_per_mat;
  for (const GpuMatrix::Part& part : w.parts) {
    const int64_t a = std::max(first, part.first_tile), b = std::min(last, part.first_tile + part.tiles);
    if (a >= b) continue;
    const int64_t row0 = (a - first) * w.rows_per_tile;
    const Push push{u32(w.mat_rows - row0, "rows"), u32(w.cols, "cols"), u32(op.n_tok, "tokens"),
                    u32(a - part.first_tile, "tile"), u32(b - a, "tiles"), u32(w.dense ? w.tile_bytes / 4 : 0, "row words"),
                    u32(op.x_offset, "x offset"), u32(op.ldx, "ldx"), u32(op.y_offset + row0, "y offset"),
                    u32(op.ldy, "ldy"), 0, 0, 0};
    stream.dispatch(pipe, {in(*part.buffer), in(*op.x), out(*op.y)}, &push, sizeof push,
                    grid(w, tiled, op.n_tok, push.count, 1));
  }
}

// One dispatch per buffer, over as many experts as may have rows (decode:
// k): every workgroup looks up its expert and rows in the route and skips
// the tiles another buffer holds.
void grouped_matmul(Device& device, Stream& stream, const GroupedMatmulOp& op) {
  const GpuMatrix& w = *op.w;
  if (w.mat_rows == w.rows && op.n_expert != 1) throw GpuError("grouped matmul: " + std::to_string(op.n_expert) + " experts of one matrix");
  const bool tiled = w.dense || op.n_tok >= kTiledMatmulTokens;  // dense weights have no grouped GEMV
  const Pipeline& pipe = matmul_pipeline(device, w, tiled, true);
  for (const GpuMatrix::Part& part : w.parts) {
    const Push push{u32(w.mat_rows, "rows"), u32(w.cols, "cols"), u32(op.n_tok, "tokens"), u32(part.first_tile, "tile"),
                    u32(part.tiles, "tiles"), u32(w.dense ? w.tile_bytes / 4 : 0, "row words"), 0, u32(op.ldx, "ldx"),
                    0, u32(op.ldy, "ldy"), u32(w.tiles_per_mat, "tiles"), u32(op.n_expert, "experts"), op.gather ? 1u : 0u};
    stream.dispatch(pipe, {in(*part.buffer), in(*op.x), out(*op.y), in(*op.route)}, &push, sizeof push,
                    grid(w, tiled, op.n_tok, u32(w.tiles_per_mat, "tiles"),
                         u32(std::min(op.n_expert, op.n_tok * op.k), "experts")));
  }
}

}  // namespace basalt::gpu
