// SPDX-License-Identifier: MIT
// Pieces that architectures' graph builders share (as llama.cpp's build_norm,
// build_ffn): a builder is a few calls to these, in its own order.
#pragma once

#include "core/graph/graph.h"
#include "core/model/model.h"

namespace basalt {

// The activations of a pre-norm decoder: the residual stream x, a block's
// normed input h, attention's q, k, v and output, a block's output o, the
// FFN's gate and up; the last rows' x, h and the logits.
struct DecoderTensors {
  int x, h, q, k, v, att, o, gate, up, x_out, h_out, logits;
};
DecoderTensors add_decoder_tensors(Graph& g, const ModelSpec& s);

// x = token_embd[tokens]
void build_embedding(Graph& g, const Model& m, const DecoderTensors& t);
// x = rope(x) in place, with this layer's RoPE base and position scale
void build_rope(Graph& g, int x, float theta, float freq_scale);
// x = x + Wo attention(rope(Wq h + bq), rope(Wk h + bk), Wv h + bv), h = rms_norm(x);
// Q and K normed per head before RoPE where the layer has those norms (Qwen3)
void build_attention(Graph& g, const ModelSpec& s, const LayerWeights& l, const DecoderTensors& t);
// x = x + FFN(rms_norm(x)): SwiGLU, or the MoE experts where the spec has them
void build_ffn(Graph& g, const ModelSpec& s, const LayerWeights& l, const DecoderTensors& t);
// logits = output(rms_norm(x)) for the rows that want them (soft-capped where the spec says)
void build_output(Graph& g, const Model& m, const DecoderTensors& t);

// The llama graph: embedding, blocks of attention then FFN, output. Qwen2's
// and Qwen3's too: their biases and Q/K norms are in the weights.
Graph build_llama_graph(const Model& m);

// Gemma's graph (2 and 3): the embedding scaled by sqrt(n_embd); per block,
// RMS norms on each head's Q and K before RoPE where the layer has them
// (Gemma 3), a norm on the attention's and the FFN's outputs before their
// residual adds, GeGLU; local layers (ModelSpec::layer_windowed) with their
// own RoPE base where the spec has one (Gemma 3's rope_theta_swa).
Graph build_gemma_graph(const Model& m);

}  // namespace basalt
