// 16-bit floating types stored as bits; arithmetic goes through float.
// Written so that the same code compiles for host and device.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define EMBER_HOST_DEVICE __host__ __device__
#else
#define EMBER_HOST_DEVICE
#endif

namespace ember {

namespace detail {
EMBER_HOST_DEVICE inline uint32_t float_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
#endif
}
EMBER_HOST_DEVICE inline float bits_float(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, 4);
  return f;
#endif
}
}  // namespace detail

/// IEEE binary16.
struct Half {
  uint16_t bits = 0;
  Half() = default;
  EMBER_HOST_DEVICE Half(float f) : bits(from_float(f)) {}             // NOLINT
  EMBER_HOST_DEVICE operator float() const { return to_float(bits); }  // NOLINT

  EMBER_HOST_DEVICE static uint16_t from_float(float f) {
    uint32_t x = detail::float_bits(f);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t abs = x & 0x7fffffffu;
    if (abs >= 0x7f800000u) return static_cast<uint16_t>(sign | (abs > 0x7f800000u ? 0x7e00u : 0x7c00u));
    if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow to inf
    if (abs < 0x38800000u) {                                               // subnormal or zero in half
      float v = detail::bits_float(abs) + 0.5f;  // align so the low bits hold the result, rounded
      return static_cast<uint16_t>(sign | (detail::float_bits(v) - 0x3f000000u));
    }
    uint32_t mant_odd = (abs >> 13) & 1u;
    abs += 0xc8000fffu + mant_odd;  // rebias exponent and round to nearest even
    return static_cast<uint16_t>(sign | (abs >> 13));
  }
  EMBER_HOST_DEVICE static float to_float(uint16_t h) {
    uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;
    if (exp == 0x1f) return detail::bits_float(sign | 0x7f800000u | (mant << 13));
    if (exp == 0) {
      float v = static_cast<float>(mant) * 5.9604644775390625e-8f;  // 2^-24
      return sign ? -v : v;
    }
    return detail::bits_float(sign | ((exp + 112) << 23) | (mant << 13));
  }
};

/// bfloat16: the top 16 bits of a float32, rounded to nearest even.
struct BFloat16 {
  uint16_t bits = 0;
  BFloat16() = default;
  EMBER_HOST_DEVICE BFloat16(float f) : bits(from_float(f)) {}                                                // NOLINT
  EMBER_HOST_DEVICE operator float() const { return detail::bits_float(static_cast<uint32_t>(bits) << 16); }  // NOLINT

  EMBER_HOST_DEVICE static uint16_t from_float(float f) {
    uint32_t x = detail::float_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;  // NaN
    x += 0x7fffu + ((x >> 16) & 1u);
    return static_cast<uint16_t>(x >> 16);
  }
};

}  // namespace ember
