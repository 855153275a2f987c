// SPDX-License-Identifier: MIT
// qa matmul: shaders/matmul_qa.comp, one workgroup per tile of 16 rows and 4 tokens.
#include <algorithm>

#include "gpu/ops.h"
#include "gpu/pipeline.h"

namespace basalt::gpu {

namespace {
constexpr uint32_t kSlices = 16;  // K slices per workgroup (the shader's SLICES)
constexpr uint32_t kTokens = 4;   // tokens per workgroup (the shader's TOK)

struct Push {
  uint32_t rows, cols, n_tok, tile0, x_offset, ldx, y_offset, ldy;
};

uint32_t u32(int64_t v, const char* what) {
  if (v < 0 || v > UINT32_MAX) throw GpuError(std::string("matmul: ") + what + " out of range for the shader");
  return static_cast<uint32_t>(v);
}
}  // namespace

std::string matmul_shader(const Weight& w) {
  if (w.format != WeightFormat::qa || !w.input_perm.empty()) return "";
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

GpuMatrix upload_matrix(Device& device, const Weight& w) {
  GpuMatrix m;
  m.shader = matmul_shader(w);
  if (m.shader.empty()) throw GpuError("no GPU matmul for " + w.name + " (" + w.describe() + ")");
  m.rows = w.rows;
  m.cols = w.cols;
  m.mat_rows = w.mat_rows;
  m.tiles_per_mat = w.tiles_per_mat();
  const size_t bytes = w.total_bytes();
  if (bytes > device.info().max_storage_range)
    throw GpuError(w.name + ": " + std::to_string(bytes >> 20) + " MiB is more than one binding may span on " +
                       device.info().name,
                   VK_ERROR_OUT_OF_DEVICE_MEMORY);
  m.buffer = std::make_unique<Buffer>(device, bytes, Memory::device, "weights of " + w.name);
  write_buffer(device, *m.buffer, w.data, bytes);
  return m;
}

void matmul(Device& device, Stream& stream, const MatmulOp& op) {
  const GpuMatrix& w = *op.w;
  const Pipeline& pipe = device.pipeline({w.shader, 3, sizeof(Push), {kSlices}});
  const Push push{u32(w.mat_rows, "rows"),   u32(w.cols, "cols"),        u32(op.n_tok, "tokens"),
                  u32(op.mat * w.tiles_per_mat, "tile"), u32(op.x_offset, "x offset"), u32(op.ldx, "ldx"),
                  u32(op.y_offset, "y offset"), u32(op.ldy, "ldy")};
  const Groups groups{u32(w.tiles_per_mat, "tiles"), 1, u32((op.n_tok + kTokens - 1) / kTokens, "token groups")};
  stream.dispatch(pipe, {in(*w.buffer), in(*op.x), out(*op.y)}, &push, sizeof push, groups);
}

}  // namespace basalt::gpu
