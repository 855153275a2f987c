// SPDX-License-Identifier: MIT
// A quantized layer (quant/gptq_solver.h) packed the way GPTQ checkpoints
// store it (the layout is in quant/convert_gptq.h): what `basalt quantize`
// writes, and, through weight_from_gptq, what the engine then runs, so the
// calibration passes see exactly the weights the checkpoint will hold.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/safetensors/safetensors_writer.h"
#include "quant/gptq_solver.h"
#include "quant/weight.h"

namespace basalt {

struct GptqPacked {
  int bits = 4;
  bool v2 = false;  // zeros stored as they are (checkpoint_format gptq_v2); else zero - 1
  int64_t n_out = 0, n_in = 0, n_groups = 0;
  int64_t group_size = 128;  // -1: one group per row
  std::vector<int32_t> qweight;  // [n_in * bits / 32][n_out]
  std::vector<int32_t> qzeros;   // [n_groups][n_out * bits / 32]
  std::vector<uint16_t> scales;  // [n_groups][n_out] f16
  std::vector<int32_t> g_idx;    // [n_in]
};

// l as gptq_quantize made it with opt. Error if the bits are not 4 or 8,
// n_out is not a multiple of 32 / bits, or a zero cannot be stored in the
// gptq format (zero 0: use v2).
GptqPacked gptq_pack(const GptqLayer& l, const GptqOptions& opt, bool v2);

// The same layer with its outputs reordered: row r of the result is row
// rows[r] of p (HF's rotate-half order for Q and K of GGUF llama files).
GptqPacked gptq_reorder_outputs(const GptqPacked& p, const std::vector<int32_t>& rows);

// Layers of one input side by side, as one layer: the outputs of parts[0],
// then of parts[1], ... (Phi-3's qkv_proj, gate_up_proj). Error unless they
// share bits, groups and input order.
GptqPacked gptq_concat_outputs(const std::vector<const GptqPacked*>& parts);

// The engine weight (quant/convert_gptq.h), bit for bit what a loader of the
// written checkpoint gets.
Weight gptq_packed_weight(const GptqPacked& p, const std::string& name);

// prefix.qweight, .qzeros, .scales, .g_idx, pointing into p.
std::vector<StTensorOut> gptq_tensors_out(const GptqPacked& p, const std::string& prefix);

}  // namespace basalt
