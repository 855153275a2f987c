// SPDX-License-Identifier: MIT
// Parameters of ops that every backend implements alike.
#pragma once

#include <cstdint>

#include "core/model/model_spec.h"

namespace basalt {

// RoPE over the first rope_dim dims of each of n_head heads of head_dim.
struct RopeParams {
  int64_t n_head, head_dim, rope_dim;
  float theta_base, freq_scale;
  RopeStyle style;
};

}  // namespace basalt
