// SPDX-License-Identifier: MIT
// GPTQ for a whole model, one block at a time, as the paper's reference code
// runs it. The residual stream of the calibration windows is kept between
// blocks. For block i, a first pass over the windows accumulates H = X^T X
// for each input its linear layers read (q, k and v share one, gate and up
// another; o and down have their own), the solver (quant/gptq_solver.h)
// quantizes each layer, and a second pass runs the block with its quantized
// weights to give block i + 1 its inputs, so later blocks correct for the
// error of earlier ones. MoE experts get their Hessians from the tokens the
// router sends them (RunContext::expert_inputs). Memory: the windows'
// residual stream and one block's Hessians.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/model/model.h"
#include "core/models/arch.h"
#include "quant/gptq_pack.h"
#include "quant/gptq_solver.h"

namespace basalt {

struct ModelQuantizeOptions {
  bool gptq = true;      // false: round-to-nearest on the same grid (no calibration)
  GptqOptions layer;     // bits, group size, sym, act-order, damping
  bool v2 = false;       // store zero points as they are (gptq_v2): asymmetric grids need it
  int64_t ubatch = 512;  // tokens per calibration batch
};

// The linear layers of a block that are quantized, and where their names
// come from in the architecture's descriptor (an MoE block has the first
// four, then each expert's gate, down and up).
struct BlockLinear {
  std::string TensorNames::*role;
  Weight LayerWeights::*member;
};
inline const BlockLinear kBlockLinears[] = {
    {&TensorNames::q, &LayerWeights::wq},        {&TensorNames::k, &LayerWeights::wk},
    {&TensorNames::v, &LayerWeights::wv},        {&TensorNames::o, &LayerWeights::wo},
    {&TensorNames::gate, &LayerWeights::w_gate}, {&TensorNames::up, &LayerWeights::w_up},
    {&TensorNames::down, &LayerWeights::w_down},
};
inline constexpr size_t kNumAttentionLinears = 4;

// A quantized layer: its HF tensor name without suffix (from the descriptor:
// "model.layers.0.self_attn.q_proj", "model.layers.0.block_sparse_moe.experts.3.w1").
struct QuantizedLinear {
  std::string name;
  std::string TensorNames::*role;  // its place in TensorNames (&TensorNames::q, ...)
  GptqPacked packed;
};

struct QuantizeProgress {
  int64_t layer, n_layer;
  const char* stage;  // "calibrating", "solving", "updating"
  double fraction;    // of the whole job
};

// Quantizes the blocks' linear layers in place (each becomes the engine form
// of its packed layer) and returns the packed layers per block. windows: the
// calibration token sequences (unused by round-to-nearest). The token
// embedding, the output layer and MoE routers are left as they are; an expert
// that no calibration token reaches is rounded to nearest. Error for models
// already GPTQ-quantized, and no windows for GPTQ.
std::vector<std::vector<QuantizedLinear>> quantize_model(Model& model, const std::vector<std::vector<int32_t>>& windows,
                                                         const ModelQuantizeOptions& o,
                                                         const std::function<void(const QuantizeProgress&)>& progress = {});

}  // namespace basalt
