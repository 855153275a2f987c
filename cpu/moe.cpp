// SPDX-License-Identifier: MIT
#include "cpu/moe.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/util/thread_pool.h"
#include "cpu/matmul.h"
#include "cpu/ops.h"

namespace basalt::cpu {

void route_top_k(const float* logits, int64_t n_expert, int64_t k, int32_t* ids, float* weights) {
  std::vector<int32_t> order(static_cast<size_t>(n_expert));
  std::iota(order.begin(), order.end(), 0);
  // Top k by logit (softmax is monotonic); ties keep the lower id first.
  std::partial_sort(order.begin(), order.begin() + k, order.end(),
                    [&](int32_t a, int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); });
  const float mx = logits[order[0]];
  float total = 0;
  for (int64_t i = 0; i < k; ++i) {
    ids[i] = order[static_cast<size_t>(i)];
    weights[i] = std::exp(logits[ids[i]] - mx);
    total += weights[i];
  }
  // softmax over all experts, then renormalized over the chosen k, equals a
  // softmax over the chosen k alone.
  for (int64_t i = 0; i < k; ++i) weights[i] /= total;
}

namespace {

constexpr int64_t kRowsWork = 8192;  // values a thread's share of a row loop holds at least

// x [n][w] in the order perm gives (GPTQ act-order; nullptr: as it is), and its
// int8 form when the weight wants one.
const float* gather(const float* x, int64_t n, int64_t w, const int32_t* perm, std::vector<float>& buf, QuantizedActs& q,
                    bool quantize, const QuantizedActs** xq) {
  const float* out = x;
  if (perm) {
    buf.resize(static_cast<size_t>(n * w));
    for (int64_t t = 0; t < n; ++t)
      for (int64_t k = 0; k < w; ++k) buf[static_cast<size_t>(t * w + k)] = x[t * w + perm[k]];
    out = buf.data();
  }
  *xq = nullptr;
  if (quantize) quantize_activations(out, n, w, q), *xq = &q;
  return out;
}

}  // namespace

void moe_ffn(const MoeWeights& m, const float* x, float* y, int64_t n, int64_t d, MoeScratch& s) {
  const int64_t E = m.n_expert, K = m.n_used, F = m.n_ff;
  // 1. Router logits for every token, then each token's top k.
  s.logits.resize(static_cast<size_t>(n * E));
  const bool q_router = m.router->format == WeightFormat::qa;
  const bool q_experts = m.gate->format == WeightFormat::qa;
  if (q_router || q_experts) quantize_activations(x, n, d, s.xq);
  matmul({m.router, x, q_router ? &s.xq : nullptr, n, s.logits.data(), E, 0, E});
  s.choice.resize(static_cast<size_t>(n * K));
  s.choice_w.resize(static_cast<size_t>(n * K));
  for (int64_t t = 0; t < n; ++t)
    route_top_k(s.logits.data() + t * E, E, K, s.choice.data() + t * K, s.choice_w.data() + t * K);

  std::fill(y, y + n * d, 0.0f);
  s.xe.resize(static_cast<size_t>(n * d));
  s.gate.resize(static_cast<size_t>(n * F));
  s.up.resize(static_cast<size_t>(n * F));
  s.ye.resize(static_cast<size_t>(n * d));
  // 2. Per expert: gather its tokens, run its three matmuls once over all of them.
  for (int64_t e = 0; e < E; ++e) {
    s.tokens.clear();
    s.weights.clear();
    for (int64_t t = 0; t < n; ++t)
      for (int64_t i = 0; i < K; ++i)
        if (s.choice[t * K + i] == e) {
          s.tokens.push_back(static_cast<int32_t>(t));
          s.weights.push_back(s.choice_w[t * K + i]);
        }
    const int64_t ne = static_cast<int64_t>(s.tokens.size());
    if (ne == 0) continue;
    const int32_t *gate_perm = m.gate->perm_of(e), *up_perm = m.up->perm_of(e), *down_perm = m.down->perm_of(e);
    const bool same_order = gate_perm == nullptr ? up_perm == nullptr : up_perm && std::equal(gate_perm, gate_perm + d, up_perm);
    // The float rows, where something reads them: int8 experts in the model's order take the router's int8 rows.
    if (!q_experts || gate_perm || up_perm || s.observer)
      parallel_for(ne, std::max<int64_t>(1, kRowsWork / d), [&](int64_t i0, int64_t i1) {
        for (int64_t i = i0; i < i1; ++i) std::copy_n(x + s.tokens[i] * d, d, s.xe.data() + i * d);
      });
    if (s.observer) s.observer(e, 0, s.xe.data(), ne);
    const QuantizedActs* xq = nullptr;
    // In the model's column order, the router's int8 rows are this expert's too.
    const float* xg = gather(s.xe.data(), ne, d, gate_perm, s.xp, s.hq, q_experts && gate_perm, &xq);
    if (q_experts && !gate_perm) s.hq.gather(s.xq, s.tokens.data(), ne), xq = &s.hq;
    matmul({m.gate, xg, xq, ne, s.gate.data(), F, e * F, (e + 1) * F});
    if (!same_order) xg = gather(s.xe.data(), ne, d, up_perm, s.xp, s.hq, q_experts, &xq);
    matmul({m.up, xg, xq, ne, s.up.data(), F, e * F, (e + 1) * F});
    const bool q_down = m.down->format == WeightFormat::qa;
    swiglu(s.gate.data(), s.up.data(), s.gate.data(), ne, F, q_down && !down_perm ? &s.hq : nullptr);
    if (s.observer) s.observer(e, 1, s.gate.data(), ne);
    const QuantizedActs* hq = q_down ? &s.hq : nullptr;
    const float* h = down_perm ? gather(s.gate.data(), ne, F, down_perm, s.xp, s.hq, q_down, &hq) : s.gate.data();
    matmul({m.down, h, hq, ne, s.ye.data(), d, e * d, (e + 1) * d});
    // Each token once per expert: the rows are the threads' to share.
    parallel_for(ne, std::max<int64_t>(1, kRowsWork / d), [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        float* yt = y + s.tokens[i] * d;
        const float* ye = s.ye.data() + i * d;
        for (int64_t j = 0; j < d; ++j) yt[j] += s.weights[i] * ye[j];
      }
    });
  }
}

}  // namespace basalt::cpu
