// SPDX-License-Identifier: MIT
// Parameters of ops that every backend implements alike.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "core/error.h"
#include "core/graph/graph.h"
#include "core/model/model_spec.h"

namespace basalt {

// RoPE over the first rope_dim dims of each of n_head heads of head_dim:
// pair i of a token at position p turns by the angle p * freqs[i], and its
// cos and sin are scaled by mscale (YaRN's attention factor; else 1).
struct RopeParams {
  int64_t n_head, head_dim, rope_dim;
  float theta_base, freq_scale;  // with the spec, what freqs and mscale were made from
  RopeStyle style;
  std::vector<float> freqs;  // rope_dim / 2
  float mscale = 1;
};

// The frequencies of base theta, positions scaled by freq_scale, with the
// spec's YaRN and per-pair factors when `scaled` (core/graph/rope.cpp); a
// LongRoPE model's factors are those of a context of n_ctx positions.
RopeParams make_rope(int64_t n_head, const ModelSpec& s, float theta, float freq_scale, bool scaled, int64_t n_ctx);

// A rope node's parameters over rows of width values in a context of n_ctx
// positions: its layer's base and scale. Only the layers with the model's own
// base take its long-context scaling (llama.cpp's choice too: Gemma 3's local
// layers keep theirs).
inline RopeParams rope_params(const Node& n, const ModelSpec& s, int64_t width, int64_t n_ctx) {
  if (!(n.rope_theta > 0)) throw Error("internal: a rope node without its base");
  return make_rope(width / s.head_dim, s, n.rope_theta, n.rope_freq_scale, n.rope_theta == s.rope_theta, n_ctx);
}

// cos and sin of each pair's angle at position pos, times mscale.
inline void rope_cos_sin(const RopeParams& p, int32_t pos, float* cs, float* sn) {
  const auto half = static_cast<int64_t>(p.freqs.size());
  for (int64_t i = 0; i < half; ++i) {
    const float angle = static_cast<float>(pos) * p.freqs[static_cast<size_t>(i)];
    cs[i] = std::cos(angle) * p.mscale;
    sn[i] = std::sin(angle) * p.mscale;
  }
}

// The cos and sin of every pair of n tokens at positions pos: [2][n][rope_dim
// / 2], the cos of every token, then the sin. A batch's rope nodes of one
// base and scale share them (Gemma 3's local and global layers make two
// sets): a step makes them once, not once per layer (core/graph/rope.cpp).
std::vector<float> rope_tables(const int32_t* pos, int64_t n, const RopeParams& p);

}  // namespace basalt
