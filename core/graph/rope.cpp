// SPDX-License-Identifier: MIT
// RoPE frequencies: plain, linear, per-pair factors (Llama 3, LongRoPE) and YaRN.
// YaRN (arXiv 2309.00071), as HF transformers' _compute_yarn_parameters and
// ggml's rope_yarn define it: a pair that turns fewer than beta_slow times
// in the original context is interpolated (its frequency x freq_scale), one
// that turns more than beta_fast times is kept, those between are mixed by
// a linear ramp over the pair index; cos and sin are scaled by
// 1 + 0.1 ln(1 / freq_scale) (the "attention temperature").
#include <algorithm>
#include <cmath>

#include "core/graph/op_params.h"

namespace basalt {

namespace {

// The pair index (fractional) whose wavelength makes `turns` turns in ctx positions.
double yarn_pair(double rope_dim, double ctx, double turns, double base) {
  return rope_dim * std::log(ctx / (turns * 2 * M_PI)) / (2 * std::log(base));
}

}  // namespace

RopeParams make_rope(int64_t n_head, const ModelSpec& s, float theta, float freq_scale, bool scaled, int64_t n_ctx) {
  RopeParams p{n_head, s.head_dim, s.rope_dim, theta, freq_scale, s.rope_style, {}, 1.0f};
  const int64_t half = s.rope_dim / 2;
  const std::vector<float>& pair_factors = s.rope_factors_for(n_ctx);
  const bool factors = scaled && !pair_factors.empty();
  if (factors && static_cast<int64_t>(pair_factors.size()) != half)
    throw Error("internal: " + std::to_string(pair_factors.size()) + " RoPE frequency factors for " +
                std::to_string(half) + " pairs");
  const bool yarn = scaled && s.yarn_orig_ctx > 0;
  if (scaled) p.mscale = s.rope_attn_factor;  // LongRoPE's attention factor (1 for most models)
  double low = 0, high = 0;
  if (yarn) {  // the ramp's ends, whole pairs as HF and ggml round them
    const auto ctx = static_cast<double>(s.yarn_orig_ctx), dim = static_cast<double>(s.rope_dim);
    low = std::max(0.0, std::floor(yarn_pair(dim, ctx, s.yarn_beta_fast, theta)));
    high = std::min(dim - 1, std::ceil(yarn_pair(dim, ctx, s.yarn_beta_slow, theta)));
    p.mscale = static_cast<float>(s.rope_attn_factor * (1 + 0.1 * std::log(1.0 / freq_scale)));
  }
  p.freqs.resize(static_cast<size_t>(half));
  // theta^(-2i / rope_dim) by products (in double: exact to ~1e-15 at i = 256),
  // not a pow a pair: this runs for every rope node of every step.
  const double step = std::pow(static_cast<double>(theta), -2.0 / static_cast<double>(s.rope_dim));
  double unscaled = 1;
  for (int64_t i = 0; i < half; ++i, unscaled *= step) {
    double f = unscaled;
    if (factors) f /= pair_factors[static_cast<size_t>(i)];
    double scale = freq_scale;
    if (yarn) {  // keep = 1 below `low` (fast pairs), 0 past `high` (slow pairs)
      const double y = (static_cast<double>(i) - low) / std::max(0.001, high - low);
      const double keep = (1 - std::clamp(y, 0.0, 1.0)) * s.yarn_ext_factor;
      scale = freq_scale * (1 - keep) + keep;
    }
    p.freqs[static_cast<size_t>(i)] = static_cast<float>(f * scale);
  }
  return p;
}

std::vector<float> rope_tables(const int32_t* pos, int64_t n, const RopeParams& p) {
  const int64_t half = p.rope_dim / 2;
  std::vector<float> cs(static_cast<size_t>(2 * n * half));
  for (int64_t t = 0; t < n; ++t) rope_cos_sin(p, pos[t], cs.data() + t * half, cs.data() + (n + t) * half);
  return cs;
}

}  // namespace basalt
