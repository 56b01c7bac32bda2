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

  // Both conversions compute every case and select with bit masks, without branches, so that a
  // loop of them vectorizes on the host (the build targets baseline x86-64, without F16C) and
  // no warp diverges on a device.

  /// Nearest even; overflow to infinity; NaN to the quiet NaN 0x7e00 (with the sign).
  EMBER_HOST_DEVICE static uint16_t from_float(float f) {
    const uint32_t x = detail::float_bits(f), abs = x & 0x7fffffffu;
    const uint32_t normal = (abs + 0xc8000fffu + ((abs >> 13) & 1u)) >> 13;  // rebias, round to nearest even
    // Zero or subnormal in half: the addition aligns the low bits to hold the result, rounded.
    const uint32_t tiny = detail::float_bits(detail::bits_float(abs & 0x3fffffffu) + 0.5f) - 0x3f000000u;
    const uint32_t is_nan = 0u - static_cast<uint32_t>(abs > 0x7f800000u);               // all ones or none
    const uint32_t is_big = (0u - static_cast<uint32_t>(abs >= 0x477ff000u)) & ~is_nan;  // infinity once rounded
    const uint32_t is_tiny = 0u - static_cast<uint32_t>(abs < 0x38800000u);
    const uint32_t is_normal = ~(is_nan | is_big | is_tiny);
    const uint32_t bits = (0x7e00u & is_nan) | (0x7c00u & is_big) | (tiny & is_tiny) | (normal & is_normal);
    return static_cast<uint16_t>(((x >> 16) & 0x8000u) | bits);
  }
  /// Exact: normal values rebias the exponent, infinities and NaNs (payload kept) move to
  /// float's top exponent, zeros and subnormals are scaled by 2^-24 through float arithmetic.
  EMBER_HOST_DEVICE static float to_float(uint16_t h) {
    const uint32_t magnitude = static_cast<uint32_t>(h & 0x7fffu) << 13, exponent = magnitude & 0x0f800000u;
    const uint32_t rebiased = magnitude + (uint32_t{112} << 23);                               // 127 - 15
    const uint32_t special = rebiased + (uint32_t{112} << 23);                                 // exponent 255
    const float tiny = detail::bits_float(rebiased + (uint32_t{1} << 23)) - 6.103515625e-05f;  // - 2^-14
    const uint32_t is_special = 0u - static_cast<uint32_t>(exponent == 0x0f800000u);
    const uint32_t is_tiny = 0u - static_cast<uint32_t>(exponent == 0);
    const uint32_t bits =
        (special & is_special) | (detail::float_bits(tiny) & is_tiny) | (rebiased & ~(is_special | is_tiny));
    return detail::bits_float(bits | (static_cast<uint32_t>(h & 0x8000u) << 16));
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
