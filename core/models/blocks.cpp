// SPDX-License-Identifier: MIT
#include "core/models/blocks.h"

#include <cmath>
#include <utility>

namespace basalt {

DecoderTensors add_decoder_tensors(Graph& g, const ModelSpec& s) {
  DecoderTensors t;
  t.x = g.add_tensor("x", s.n_embd);
  t.h = g.add_tensor("h", s.n_embd);
  t.q = g.add_tensor("q", s.q_dim());
  t.k = g.add_tensor("k", s.kv_dim());
  t.v = g.add_tensor("v", s.kv_dim());
  t.att = g.add_tensor("attn", s.q_dim());
  t.o = g.add_tensor("o", s.n_embd);
  t.gate = g.add_tensor("gate", s.n_ff);
  t.up = g.add_tensor("up", s.n_ff);
  t.x_out = g.add_tensor("x_out", s.n_embd, true);
  t.h_out = g.add_tensor("h_out", s.n_embd, true);
  t.logits = g.add_tensor("logits", s.n_vocab, true);
  g.tokens_out = t.x;
  g.logits = t.logits;
  return t;
}

void build_embedding(Graph& g, const Model& m, const DecoderTensors& t) { g.add(Op::embed, t.x, {}).weight = &m.token_embd(); }

void build_rope(Graph& g, int x, float theta, float freq_scale) {
  Node& rope = g.add(Op::rope, x, {x});
  rope.rope_theta = theta, rope.rope_freq_scale = freq_scale;
}

namespace {

// Qwen3's and Gemma 3's RMS norm on each head of Q and K before RoPE (head_dim weights), where the layer has them.
void build_head_norms(Graph& g, const ModelSpec& s, const LayerWeights& l, const DecoderTensors& t) {
  if (l.q_norm.empty()) return;
  for (auto [x, w] : {std::pair{t.q, &l.q_norm}, std::pair{t.k, &l.k_norm}}) {
    Node& n = g.add(Op::rms_norm, x, {x});
    n.vec = w, n.eps = s.rms_eps;
  }
}

}  // namespace

void build_attention(Graph& g, const ModelSpec& s, const LayerWeights& l, const DecoderTensors& t) {
  Node& norm = g.add(Op::rms_norm, t.h, {t.x});
  norm.vec = &l.attn_norm, norm.eps = s.rms_eps;
  g.add(Op::matmul, t.q, {t.h}).weight = &l.wq, g.nodes.back().vec = &l.bq;
  g.add(Op::matmul, t.k, {t.h}).weight = &l.wk, g.nodes.back().vec = &l.bk;
  g.add(Op::matmul, t.v, {t.h}).weight = &l.wv, g.nodes.back().vec = &l.bv;
  build_head_norms(g, s, l, t);
  for (int x : {t.q, t.k}) build_rope(g, x, s.rope_theta, s.rope_freq_scale);
  g.add(Op::attention, t.att, {t.q, t.k, t.v});
  g.add(Op::matmul, t.o, {t.att}).weight = &l.wo;
  g.add(Op::add, t.x, {t.x, t.o});
}

void build_ffn(Graph& g, const ModelSpec& s, const LayerWeights& l, const DecoderTensors& t) {
  Node& norm = g.add(Op::rms_norm, t.h, {t.x});
  norm.vec = &l.ffn_norm, norm.eps = s.rms_eps;
  if (s.is_moe()) {
    g.moe.push_back({&l.router, &l.gate_exps, &l.up_exps, &l.down_exps, s.n_expert, s.n_expert_used, s.n_ff});
    g.add(Op::moe, t.o, {t.h}).moe = &g.moe.back();
  } else {
    g.add(Op::matmul, t.gate, {t.h}).weight = &l.w_gate;
    g.add(Op::matmul, t.up, {t.h}).weight = &l.w_up;
    g.add(Op::swiglu, t.gate, {t.gate, t.up});
    g.add(Op::matmul, t.o, {t.gate}).weight = &l.w_down;
  }
  g.add(Op::add, t.x, {t.x, t.o});
}

void build_output(Graph& g, const Model& m, const DecoderTensors& t) {
  g.current_layer = -1;
  g.add(Op::gather_out, t.x_out, {t.x});
  Node& norm = g.add(Op::rms_norm, t.h_out, {t.x_out});
  norm.vec = &m.output_norm(), norm.eps = m.spec().rms_eps;
  g.add(Op::matmul, t.logits, {t.h_out}).weight = &m.output();
  if (m.spec().final_softcap > 0) g.add(Op::softcap, t.logits, {t.logits}).scale = m.spec().final_softcap;
}

Graph build_llama_graph(const Model& m) {
  const ModelSpec& s = m.spec();
  Graph g;
  g.moe.reserve(static_cast<size_t>(s.n_layer));  // nodes point into it
  const DecoderTensors t = add_decoder_tensors(g, s);
  build_embedding(g, m, t);
  for (int64_t i = 0; i < s.n_layer; ++i) {
    g.current_layer = static_cast<int>(i);
    build_attention(g, s, m.layer(i), t);
    build_ffn(g, s, m.layer(i), t);
  }
  build_output(g, m, t);
  return g;
}

Graph build_gemma_graph(const Model& m) {
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
    build_head_norms(g, s, l, t);
    const bool own_base = local && s.rope_theta_swa > 0;  // no position scaling there
    for (int x : {t.q, t.k}) build_rope(g, x, own_base ? s.rope_theta_swa : s.rope_theta, own_base ? 1.0f : s.rope_freq_scale);
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

}  // namespace basalt
