// SPDX-License-Identifier: MIT
// The q4 KV cache (kv_cache.h) stores each head's values rotated by H, the
// normalized Walsh-Hadamard matrix (orthogonal and symmetric, so its own
// inverse), over blocks of kv_rotation_block(head_dim) dimensions. A few large
// channels would set the scale of their whole group of 32 and leave the rest a
// code or two; rotated, every dimension holds a share of them and the 16 codes
// cover the values. Attention is unchanged: sum_j p_j H v_j = H (sum_j p_j
// v_j), so the kernels rotate their outputs, not each value. q8 keys are
// rotated too (kv_keys_rotated), for their one scale per head; the kernels
// rotate the query rows for them: (H q) . (H k) = q . k. (q4 keys are rounded
// per channel instead, which serves them better: no rotation.)
#pragma once

#include <cstdint>

namespace basalt {

// head_dim where it is a power of two (64, 128, 256), else 32 (head_dim is a
// multiple of 32 for a q4 cache).
int64_t kv_rotation_block(int64_t head_dim);
// x (head_dim floats) -> H x, in place.
void kv_rotate(float* x, int64_t head_dim);

}  // namespace basalt
