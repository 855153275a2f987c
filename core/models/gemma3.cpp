// SPDX-License-Identifier: MIT
// Gemma 3 (text): the embedding scaled by sqrt(n_embd); per block, RMS norms
// on each head's Q and K before RoPE, a norm on the attention's and the FFN's
// outputs before their residual adds, and GeGLU; local layers (a sliding
// window, RoPE base rope_theta_swa) interleaved with a global one every
// swa_period layers; the output tied to the embedding. As llama.cpp reads its
// GGUF files: the converter stored every norm weight as 1 + w, so the norms
// are plain RMS norms here. No HF class yet (its norm weights are the w alone).
#include <cmath>

#include "core/error.h"
#include "core/gguf/gguf.h"
#include "core/models/arch.h"
#include "core/models/blocks.h"

namespace basalt {

namespace {

const TensorNames& gemma3_gguf_names() {
  static const TensorNames names = {
    "token_embd", "output_norm", "output",
    "blk.{i}.attn_norm", "blk.{i}.ffn_norm",
    "blk.{i}.attn_q", "blk.{i}.attn_k", "blk.{i}.attn_v", "blk.{i}.attn_output",
    "blk.{i}.ffn_gate", "blk.{i}.ffn_up", "blk.{i}.ffn_down",
    "", "", "", "",
    "blk.{i}.attn_q_norm", "blk.{i}.attn_k_norm",
    "blk.{i}.post_attention_norm", "blk.{i}.post_ffw_norm"};
  return names;
}

// llama.cpp's defaults where the file says nothing: a global layer every 6th,
// local RoPE base 10000, queries scaled by HF's query_pre_attn_scalar^-1/2,
// which GGUF does not carry: head_dim but for the 27B (62 layers), whose
// scalar is n_embd / n_head (src/llama-model.cpp, LLM_ARCH_GEMMA3).
void read_gemma3_gguf(const GgufFile& f, ModelSpec& s) {
  s.sliding_window = f.get_int("gemma3.attention.sliding_window").value_or(0);
  s.swa_period = f.get_int("gemma3.attention.sliding_window_pattern").value_or(6);
  s.rope_theta_swa = static_cast<float>(f.get_float("gemma3.rope.freq_base_swa").value_or(10000.0));
  if (s.n_layer == 62) s.attn_scale = 1.0f / std::sqrt(static_cast<float>(s.n_embd / s.n_head));
  if (f.get_float("gemma3.final_logit_softcapping").value_or(0.0) != 0.0)
    throw Error(f.path() + ": final logit soft-capping (gemma3.final_logit_softcapping) is not supported yet");
}

Graph build_gemma3_graph(const Model& m) {
  const ModelSpec& s = m.spec();
  Graph g;
  const DecoderTensors t = add_decoder_tensors(g, s);
  const int post = g.add_tensor("post", s.n_embd);  // a block's output normed (not h: no qa matmul reads it)
  g.add(Op::embed, t.x, {}).weight = &m.token_embd(), g.nodes.back().scale = std::sqrt(static_cast<float>(s.n_embd));
  auto norm = [&](int out, int in, const std::vector<float>& w) {
    Node& n = g.add(Op::rms_norm, out, {in});
    n.vec = &w, n.eps = s.rms_eps;
  };
  auto matmul = [&](int out, int in, const Weight& w) { g.add(Op::matmul, out, {in}).weight = &w; };
  for (int64_t i = 0; i < s.n_layer; ++i) {
    g.current_layer = static_cast<int>(i);
    const LayerWeights& l = m.layer(i);
    const bool local = s.layer_windowed(i);
    norm(t.h, t.x, l.attn_norm);
    matmul(t.q, t.h, l.wq);
    matmul(t.k, t.h, l.wk);
    matmul(t.v, t.h, l.wv);
    norm(t.q, t.q, l.q_norm);  // per head: the weights have head_dim values
    norm(t.k, t.k, l.k_norm);
    for (int x : {t.q, t.k})
      build_rope(g, x, local && s.rope_theta_swa > 0 ? s.rope_theta_swa : s.rope_theta, local ? 1.0f : s.rope_freq_scale);
    g.add(Op::attention, t.att, {t.q, t.k, t.v});
    matmul(t.o, t.att, l.wo);
    norm(post, t.o, l.attn_post_norm);
    g.add(Op::add, t.x, {t.x, post});
    norm(t.h, t.x, l.ffn_norm);
    matmul(t.gate, t.h, l.w_gate);
    matmul(t.up, t.h, l.w_up);
    g.add(Op::geglu, t.gate, {t.gate, t.up});
    matmul(t.o, t.gate, l.w_down);
    norm(post, t.o, l.ffn_post_norm);
    g.add(Op::add, t.x, {t.x, post});
  }
  build_output(g, m, t);
  return g;
}

}  // namespace

const ArchDescriptor& gemma3_arch() {
  static const ArchDescriptor a{"gemma3",
                                {},
                                RopeStyle::neox,
                                /*attn_bias=*/false,
                                /*hf_sliding_window=*/false,
                                gemma3_gguf_names(),
                                {},
                                build_gemma3_graph,
                                read_gemma3_gguf};
  return a;
}

}  // namespace basalt
