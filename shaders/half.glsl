// SPDX-License-Identifier: MIT
// f32 -> f16 bits, rounded to nearest even exactly as core/util/half.h's
// f32_to_f16 (GLSL's packHalf2x16 leaves the rounding to the device).

uint f32_to_f16(float f) {
  const uint x = floatBitsToUint(f);
  const uint sign = (x >> 16) & 0x8000u, ax = x & 0x7FFFFFFFu;
  if (ax >= 0x7F800000u) return sign | 0x7C00u | (ax > 0x7F800000u ? 0x200u : 0u);  // inf, nan
  if (ax >= 0x477FF000u) return sign | 0x7C00u;                                     // overflow to inf
  if (ax < 0x38800000u) {                                                            // a subnormal half, or zero
    if (ax < 0x33000000u) return sign;
    const uint e = ax >> 23, m = (ax & 0x7FFFFFu) | 0x800000u, shift = 126u - e;
    uint r = m >> shift;
    const uint rem = m & ((1u << shift) - 1u), halfway = 1u << (shift - 1u);
    if (rem > halfway || (rem == halfway && (r & 1u) != 0u)) ++r;
    return sign | r;
  }
  uint r = (ax - 0x38000000u) >> 13;
  const uint rem = ax & 0x1FFFu;
  if (rem > 0x1000u || (rem == 0x1000u && (r & 1u) != 0u)) ++r;
  return sign | r;
}
