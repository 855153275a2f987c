// SPDX-License-Identifier: MIT
// Portable implementations of the CPU ops (the compiler vectorizes the loops).
#include <algorithm>
#include <cmath>
#include <vector>

#include "cpu/ops.h"
#include "core/util/half.h"
#include "core/util/thread_pool.h"

namespace basalt::cpu {

void rope(float* x, int64_t n, const float* tables, const RopeParams& p) {
  const int64_t half = p.rope_dim / 2;
  // Tokens in chunks across the pool (prefill); a decode token stays on the caller.
  parallel_for(n, std::max<int64_t>(1, 8192 / std::max<int64_t>(1, p.n_head * p.head_dim)), [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const float* cs = tables + t * half;
      const float* sn = tables + (n + t) * half;
      for (int64_t h = 0; h < p.n_head; ++h) {
        float* xh = x + (t * p.n_head + h) * p.head_dim;
        for (int64_t i = 0; i < half; ++i) {
          const int64_t a = p.style == RopeStyle::normal ? 2 * i : i;
          const int64_t b = p.style == RopeStyle::normal ? 2 * i + 1 : i + half;
          const float x0 = xh[a], x1 = xh[b];
          xh[a] = x0 * cs[i] - x1 * sn[i];
          xh[b] = x0 * sn[i] + x1 * cs[i];
        }
      }
    }
  });
}

void add(const float* a, const float* b, float* y, int64_t count) {
  parallel_for(count, 16384, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) y[i] = a[i] + b[i];
  });
}

void attention_ref(const float* q, const float* k, const float* v, float* out, const Batch& batch, KvCache& kv,
                   int64_t layer, const ModelSpec& spec) {
  const int64_t n = batch.size(), hd = spec.head_dim, kvd = spec.kv_dim(), qd = spec.q_dim();
  const int64_t group = spec.n_head / spec.n_head_kv;
  for (int64_t t = 0; t < n; ++t) kv.store(layer, batch.seq[t], batch.pos[t], k + t * kvd, v + t * kvd);
  const float scale = spec.query_scale();
  const int64_t window = spec.window_of(layer), sinks = spec.sinks_of(layer);
  // Per (token, KV head, part of its query heads): each cached key and value
  // read once for the query heads of a part (a q4 value read un-rotates the head);
  // parts only so that a decode step still has work for every thread.
  const int64_t units = n * spec.n_head_kv;
  const int64_t parts = std::min<int64_t>(group, (2 * engine_pool().size() + units - 1) / units);
  engine_pool().run(units * parts, [&](int64_t unit, int) {
    const int64_t t = unit / parts / spec.n_head_kv, kvh = unit / parts % spec.n_head_kv, part = unit % parts;
    const int64_t g0 = group * part / parts, g1 = group * (part + 1) / parts;
    std::vector<float> acc(static_cast<size_t>(group * hd), 0.0f), key(static_cast<size_t>(hd)), value(key.size());
    std::vector<float> m(static_cast<size_t>(group), -INFINITY), l(static_cast<size_t>(group), 0.0f);
    auto visit = [&](int64_t p) {
      kv.key_head(layer, batch.seq[t], p, kvh, key.data());
      kv.value_head(layer, batch.seq[t], p, kvh, value.data());
      for (int64_t g = g0; g < g1; ++g) {
        const float* qh = q + t * qd + (kvh * group + g) * hd;
        float* a = acc.data() + g * hd;
        float s = 0;
        for (int64_t i = 0; i < hd; ++i) s += qh[i] * key[i];
        s *= scale;
        if (spec.attn_softcap > 0) s = spec.attn_softcap * std::tanh(s / spec.attn_softcap);
        // Online softmax: rescale what was accumulated when the max grows.
        const float m_new = std::fmax(m[g], s);
        const float corr = std::exp(m[g] - m_new), w = std::exp(s - m_new);
        for (int64_t i = 0; i < hd; ++i) a[i] = a[i] * corr + w * value[i];
        l[g] = l[g] * corr + w;
        m[g] = m_new;
      }
    };
    // The sinks before the window, then the window (or all) up to the token's own position.
    const int64_t start = window > 0 ? std::max<int64_t>(0, batch.pos[t] - window + 1) : 0;
    for (int64_t p = 0; p < std::min(sinks, start); ++p) visit(p);
    for (int64_t p = start; p <= batch.pos[t]; ++p) visit(p);
    for (int64_t g = g0; g < g1; ++g)
      for (int64_t i = 0; i < hd; ++i) out[t * qd + (kvh * group + g) * hd + i] = acc[g * hd + i] / l[g];
  });
}

}  // namespace basalt::cpu
