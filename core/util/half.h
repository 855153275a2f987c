// SPDX-License-Identifier: MIT
// IEEE half and bfloat16 <-> float, portable (no ISA flags needed).
#pragma once

#include <cstdint>
#include <cstring>

#include "core/util/always_inline.h"  // this header is also included by files compiled with AVX-512 flags

namespace basalt {

BASALT_ALWAYS_INLINE float f16_to_f32(uint16_t h) {
  uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1F, man = h & 0x3FF, bits;
  if (exp == 0) {
    if (man == 0) {
      bits = sign;
    } else {  // subnormal: normalize
      int e = -1;
      do { man <<= 1; ++e; } while (!(man & 0x400));
      bits = sign | ((127 - 15 - e) << 23) | ((man & 0x3FF) << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7F800000u | (man << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Round to nearest even, as hardware conversion does.
BASALT_ALWAYS_INLINE uint16_t f32_to_f16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t ax = x & 0x7FFFFFFFu;
  if (ax >= 0x7F800000u) return static_cast<uint16_t>(sign | 0x7C00u | (ax > 0x7F800000u ? 0x200u : 0));  // inf/nan
  if (ax >= 0x477FF000u) return static_cast<uint16_t>(sign | 0x7C00u);  // overflow to inf
  if (ax < 0x38800000u) {  // subnormal or zero in half
    if (ax < 0x33000000u) return static_cast<uint16_t>(sign);
    uint32_t e = ax >> 23, m = (ax & 0x7FFFFF) | 0x800000;
    uint32_t shift = 126 - e;  // moves the 24-bit mantissa to the half's 10-bit subnormal field
    uint32_t r = m >> shift, rem = m & ((1u << shift) - 1), halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (r & 1))) ++r;
    return static_cast<uint16_t>(sign | r);
  }
  uint32_t r = ((ax - 0x38000000u) >> 13);
  uint32_t rem = ax & 0x1FFF;
  if (rem > 0x1000 || (rem == 0x1000 && (r & 1))) ++r;
  return static_cast<uint16_t>(sign | r);
}

BASALT_ALWAYS_INLINE float bf16_to_f32(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

BASALT_ALWAYS_INLINE uint16_t f32_to_bf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((x >> 16) | 0x40);  // quiet nan
  x += 0x7FFF + ((x >> 16) & 1);
  return static_cast<uint16_t>(x >> 16);
}

}  // namespace basalt
