// SPDX-License-Identifier: MIT
// The static graph of a model: built once by an architecture builder, then run
// for every batch. Activations are 2-D: [rows of the batch][width].
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "quant/weight.h"

namespace basalt {

// The one list of ops: the enum and the names come from it.
#define BASALT_OPS(X)                                                            \
  X(embed)      /* out[t] = token_embd[token t] * scale                       */ \
  X(rms_norm)   /* out = in0 / rms(in0) * vec, per slice of vec's width       */ \
  X(matmul)     /* out = in0 W^T (+ vec, the bias)                            */ \
  X(rope)       /* out = in0 rotated by each token's position (may alias)    */ \
  X(attention)  /* out = softmax(q k^T) v over the KV cache; stores k, v     */ \
  X(swiglu)     /* out = silu(in0) * in1                                      */ \
  X(geglu)      /* out = gelu(in0) * in1 (GELU's tanh form)                  */ \
  X(add)        /* out = in0 + in1                                            */ \
  X(moe)        /* out = sum of the top-k experts' SwiGLU FFNs of in0        */ \
  X(gather_out) /* out = the rows of in0 whose token wants logits             */ \
  X(softcap)    /* out = scale tanh(in0 / scale) (Gemma 2's logit capping)   */

enum class Op : uint8_t {
#define BASALT_OP_ENUM(name) name,
  BASALT_OPS(BASALT_OP_ENUM)
#undef BASALT_OP_ENUM
};
const char* op_name(Op op);

struct TensorDesc {
  std::string name;
  int64_t width = 0;
  bool output_rows = false;  // has one row per token that wants logits, not per token
};

struct MoeWeights {
  const Weight* router;
  const Weight *gate, *up, *down;  // experts' rows stacked
  int64_t n_expert, n_used, n_ff;
};

struct Node {
  Op op;
  int out = -1;
  int in[3] = {-1, -1, -1};
  const Weight* weight = nullptr;
  const std::vector<float>* vec = nullptr;  // norm weights or bias (empty: none)
  const MoeWeights* moe = nullptr;
  int layer = -1;  // the block the node belongs to (-1: before or after the blocks)
  float eps = 0;  // rms_norm
  float scale = 1;  // embed, softcap
  float rope_theta = 0, rope_freq_scale = 1;  // rope: this layer's base and position scale
};

struct Graph {
  std::vector<TensorDesc> tensors;
  std::vector<Node> nodes;
  std::vector<MoeWeights> moe;  // owned here, pointed to by nodes (reserved up front)
  int tokens_out = -1;          // the embedding
  int logits = -1;              // [n_outputs][n_vocab]
  int current_layer = -1;       // stamped on the nodes add() appends: builders set it per block

  int add_tensor(std::string name, int64_t width, bool output_rows = false);
  Node& add(Op op, int out, std::initializer_list<int> in);
};

class Model;
// Builds the graph of the model's architecture with its descriptor's builder (core/models/arch.h).
Graph build_graph(const Model& m);

}  // namespace basalt
