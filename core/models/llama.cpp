// SPDX-License-Identifier: MIT
// The llama family graph: llama 2/3, SmolLM2, TinyLlama, Mistral, Mixtral
// (experts instead of the FFN) and qwen2 (Q/K/V biases, NeoX RoPE).
#include "core/graph/graph.h"
#include "core/model/model.h"

namespace basalt {

Graph build_graph(const Model& m) {
  const ModelSpec& s = m.spec();
  Graph g;
  g.moe.reserve(static_cast<size_t>(s.n_layer));
  const int x = g.add_tensor("x", s.n_embd);  // the residual stream
  const int h = g.add_tensor("h", s.n_embd);  // normed input of a block
  const int q = g.add_tensor("q", s.q_dim());
  const int k = g.add_tensor("k", s.kv_dim());
  const int v = g.add_tensor("v", s.kv_dim());
  const int att = g.add_tensor("attn", s.q_dim());
  const int o = g.add_tensor("o", s.n_embd);
  const int gate = g.add_tensor("gate", s.n_ff);
  const int up = g.add_tensor("up", s.n_ff);
  const int xo = g.add_tensor("x_out", s.n_embd, true);
  const int ho = g.add_tensor("h_out", s.n_embd, true);
  const int logits = g.add_tensor("logits", s.n_vocab, true);

  g.tokens_out = x;
  g.add(Op::embed, x, {}).weight = &m.token_embd();
  for (int64_t i = 0; i < s.n_layer; ++i) {
    const LayerWeights& l = m.layer(i);
    g.current_layer = static_cast<int>(i);
    // x = x + Wo attention(rope(Wq h + bq), rope(Wk h + bk), Wv h + bv), h = norm(x)
    Node& n1 = g.add(Op::rms_norm, h, {x});
    n1.vec = &l.attn_norm, n1.eps = s.rms_eps;
    g.add(Op::matmul, q, {h}).weight = &l.wq, g.nodes.back().vec = &l.bq;
    g.add(Op::matmul, k, {h}).weight = &l.wk, g.nodes.back().vec = &l.bk;
    g.add(Op::matmul, v, {h}).weight = &l.wv, g.nodes.back().vec = &l.bv;
    g.add(Op::rope, q, {q});
    g.add(Op::rope, k, {k});
    g.add(Op::attention, att, {q, k, v});
    g.add(Op::matmul, o, {att}).weight = &l.wo;
    g.add(Op::add, x, {x, o});
    // x = x + FFN(norm(x))
    Node& n2 = g.add(Op::rms_norm, h, {x});
    n2.vec = &l.ffn_norm, n2.eps = s.rms_eps;
    if (s.is_moe()) {
      g.moe.push_back({&l.router, &l.gate_exps, &l.up_exps, &l.down_exps, s.n_expert, s.n_expert_used, s.n_ff});
      Node& n = g.add(Op::moe, o, {h});
      n.moe = &g.moe.back();
    } else {
      g.add(Op::matmul, gate, {h}).weight = &l.w_gate;
      g.add(Op::matmul, up, {h}).weight = &l.w_up;
      g.add(Op::swiglu, gate, {gate, up});
      g.add(Op::matmul, o, {gate}).weight = &l.w_down;
    }
    g.add(Op::add, x, {x, o});
  }
  g.current_layer = -1;
  g.add(Op::gather_out, xo, {x});
  Node& nf = g.add(Op::rms_norm, ho, {xo});
  nf.vec = &m.output_norm(), nf.eps = s.rms_eps;
  g.add(Op::matmul, logits, {ho}).weight = &m.output();
  g.logits = logits;
  return g;
}

}  // namespace basalt
