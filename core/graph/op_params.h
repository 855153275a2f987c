// SPDX-License-Identifier: MIT
// Parameters of ops that every backend implements alike.
#pragma once

#include <cstdint>

#include "core/error.h"
#include "core/graph/graph.h"
#include "core/model/model_spec.h"

namespace basalt {

// RoPE over the first rope_dim dims of each of n_head heads of head_dim.
struct RopeParams {
  int64_t n_head, head_dim, rope_dim;
  float theta_base, freq_scale;
  RopeStyle style;
};

// A rope node's parameters over rows of width values: its layer's base and scale.
inline RopeParams rope_params(const Node& n, const ModelSpec& s, int64_t width) {
  if (!(n.rope_theta > 0)) throw Error("internal: a rope node without its base");
  return {width / s.head_dim, s.head_dim, s.rope_dim, n.rope_theta, n.rope_freq_scale, s.rope_style};
}

}  // namespace basalt
