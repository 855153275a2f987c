// SPDX-License-Identifier: MIT
// The KV cache's rotation (core/graph/kv_rotation.h: q4 values, q8 keys) of
// hd floats in shared memory xs, in place, by the workgroup's WG invocations (call from
// uniform control flow): the normalized Walsh-Hadamard transform over blocks
// of n dimensions, the same butterflies (a + c, a - c) as kv_rotate, then
// times scale (1 / sqrt(n), computed by the host as the CPU computes it), so
// the device's rotated values are the CPU's bit for bit. The includer
// declares WG, and xs, or defines KV_ROTATE_AT(i) as the vector's element i
// in shared memory (attention.comp: a row of its queries).

#ifndef KV_ROTATE_AT
#define KV_ROTATE_AT(i) xs[i]
#endif

void kv_rotate_shared(uint hd, uint n, float scale) {
  barrier();
  for (uint h = 1; h < n; h *= 2) {
    for (uint pair = gl_LocalInvocationID.x; pair < hd / 2; pair += WG) {  // in block pair / (n / 2)
      const uint start = pair / (n / 2) * n, pp = pair % (n / 2), i = start + pp / h * 2 * h + pp % h;
      const float a = KV_ROTATE_AT(i), c = KV_ROTATE_AT(i + h);
      KV_ROTATE_AT(i) = a + c;
      KV_ROTATE_AT(i + h) = a - c;
    }
    barrier();
  }
  for (uint d = gl_LocalInvocationID.x; d < hd; d += WG) KV_ROTATE_AT(d) *= scale;
  barrier();
}
