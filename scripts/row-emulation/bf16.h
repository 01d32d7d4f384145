#pragma once
#include <cstdint>
#include <cstring>
struct __nv_bfloat16 {
  unsigned short b;
};
struct uint4 {
  unsigned x, y, z, w;
};
inline float __uint_as_float(unsigned u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline unsigned __float_as_uint(float f) {
  unsigned u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float __bfloat162float(__nv_bfloat16 h) { return __uint_as_float((unsigned)h.b << 16); }
inline __nv_bfloat16 __float2bfloat16_rn(float f) {
  unsigned u = __float_as_uint(f);
  unsigned r = u + 0x7fffu + ((u >> 16) & 1u);  // nearest even (no NaN inputs here)
  return {(unsigned short)(r >> 16)};
}
inline __nv_bfloat16 __float2bfloat16(float f) { return __float2bfloat16_rn(f); }
inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 h) { return h.b; }
