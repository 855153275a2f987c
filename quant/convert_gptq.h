// SPDX-License-Identifier: MIT
// GPTQ linear layers (qweight, qzeros, scales, g_idx) -> qa weights, exactly.
//
// GPTQ stores, per linear layer [n_out][n_in] (PyTorch's order):
//   qweight  I32 [n_in * bits / 32][n_out]   input row i of column o: word i / (32 / bits), bits at (i % (32 / bits)) * bits
//   qzeros   I32 [n_groups][n_out * bits / 32]  zero point of (group, o): word o / (32 / bits), likewise
//   scales   F16 [n_groups][n_out]
//   g_idx    I32 [n_in]  the group of each input row (absent: i / group_size)
// and w[o][i] = scale[g][o] * (q[i][o] - zero[g][o]) with g = g_idx[i]. The
// "gptq" checkpoint format stores zero - 1, "gptq_v2" the zero itself.
//
// Sym layers (every zero 2^(bits-1)) become f16_sym (Q4_0 / Q8_0 like), the
// others f16_zero; both hold the scale and zero as they are, so the engine's
// weights are the checkpoint's, bit for bit. Act-order (desc_act) layers,
// whose g_idx is not monotonic, are reordered by group (a stable sort) so
// every 32-input block sits in one group; Weight::input_perm records it.
#pragma once

#include <string>

#include "core/safetensors/safetensors.h"
#include "quant/weight.h"

namespace basalt {

struct GptqParams {
  int bits = 4;                // 4 or 8
  int64_t group_size = 128;    // a multiple of 32, or -1: one group per row
  bool v2 = false;             // zeros stored as they are (checkpoint_format gptq_v2)
  bool keep_zeros = false;     // f16_zero even where every zero is 2^(bits-1) (experts stack in one encoding)
};

struct GptqTensors {
  const StTensor* qweight = nullptr;
  const StTensor* qzeros = nullptr;
  const StTensor* scales = nullptr;
  const StTensor* g_idx = nullptr;  // may be absent
};

// The stored zero point every group of the layer shares, or -1 when they
// differ: a symmetric layer stores 2^(bits-1) - 1 in the gptq format and
// 2^(bits-1) in gptq_v2, which tells a mislabeled file apart.
int gptq_uniform_stored_zero(const GptqTensors& t, int bits);

// Error naming the layer for wrong dtypes, shapes, group indices or zero points.
Weight weight_from_gptq(const GptqTensors& t, const GptqParams& p, int64_t n_out, int64_t n_in, const std::string& name);

}  // namespace basalt
