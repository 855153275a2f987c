// SPDX-License-Identifier: MIT
// Mixture of experts on the CPU: route, then group the tokens by expert so
// each expert runs one matmul over all its tokens (a GEMV in decode).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "core/graph/graph.h"
#include "cpu/activations.h"

namespace basalt::cpu {

struct MoeScratch {
  std::vector<float> logits, xe, gate, up, ye;
  std::vector<float> xp;  // an expert's input in its act-order (GPTQ) column order
  std::vector<int32_t> tokens;
  std::vector<float> weights;
  std::vector<int32_t> choice;  // [n][k] expert ids
  std::vector<float> choice_w;  // [n][k] their weights
  QuantizedActs xq, hq;
  // Sees each expert's inputs (which 0: gate/up's, 1: down's), in the model's input order; may be empty.
  std::function<void(int64_t expert, int which, const float* x, int64_t rows)> observer;
};

// Softmax over all experts' router logits, keep the top k, renormalize their
// weights to sum to 1 (Mixtral). logits: [n_expert].
void route_top_k(const float* logits, int64_t n_expert, int64_t k, int32_t* ids, float* weights);

// y: [n][d] = sum over each token's experts e of w_e * down_e(silu(gate_e x) * up_e x).
void moe_ffn(const MoeWeights& m, const float* x, float* y, int64_t n, int64_t d, MoeScratch& s);

}  // namespace basalt::cpu
