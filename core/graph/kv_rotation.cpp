// SPDX-License-Identifier: MIT
#include "core/graph/kv_rotation.h"

#include <cmath>

namespace basalt {

int64_t kv_rotation_block(int64_t head_dim) {
  return (head_dim & (head_dim - 1)) == 0 ? head_dim : 32;
}

void kv_rotate(float* x, int64_t head_dim) {
  const int64_t n = kv_rotation_block(head_dim);
  const float scale = 1.0f / std::sqrt(static_cast<float>(n));
  for (float* b = x; b < x + head_dim; b += n) {
    for (int64_t h = 1; h < n; h *= 2)  // the fast transform: butterflies of distance h
      for (int64_t i = 0; i < n; i += 2 * h)
        for (int64_t j = i; j < i + h; ++j) {
          const float a = b[j], c = b[j + h];
          b[j] = a + c;
          b[j + h] = a - c;
        }
    for (int64_t i = 0; i < n; ++i) b[i] *= scale;
  }
}

}  // namespace basalt
