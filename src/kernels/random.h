// Per-element bodies of the random ops, shared by every executor.
//
// Element i (row-major position in the output) of a call with (seed, offset) uses
// stream index offset + i (philox.h). normal_ takes two uniforms for element i,
// stream indices offset + 2i and offset + 2i + 1, and applies Box-Muller; so a value
// depends only on (seed, offset, i): never on threads, chunking or output strides.
// float draws 24-bit uniforms and double 53-bit ones; normal_ in Half/BFloat16 draws
// floats, uniform_ draws in their own precision (uniform_value).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/philox.h"

namespace ember::detail {

/// Uniform in [0, 1) in the precision R (float or double) for stream index `index`.
template <typename R>
EMBER_HOST_DEVICE inline R philox_uniform(uint64_t seed, uint64_t index) {
  if constexpr (std::is_same_v<R, double>) return philox_uniform_double(seed, index);
  else return philox_uniform_float(seed, index);
}

/// from + (to - from) * u, for element i.
template <typename R>
EMBER_HOST_DEVICE inline R uniform_at(uint64_t seed, uint64_t offset, uint64_t i, R from, R to) {
  R u = philox_uniform<R>(seed, offset + i);
  R v = from + (to - from) * u;
  // Rounding can reach `to`; PyTorch's uniform_ excludes it.
  return v < to || !(from < to) ? v : from;
}

/// Element i of uniform_ into a T output, drawn in T's precision: Half and BFloat16 take
/// std::numeric_limits<T>::digits random bits (11 and 8), as PyTorch's uniform_real does,
/// so from + (to - from) * u needs no rounding for rand(); a result that still rounds up
/// to `to` when narrowed (from and to not exact in T) becomes `from`.
template <typename T, typename R>
EMBER_HOST_DEVICE inline T uniform_value(uint64_t seed, uint64_t offset, uint64_t i, R from, R to) {
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
    constexpr int kDigits = std::is_same_v<T, Half> ? 11 : 8;
    float u = static_cast<float>(philox_word(seed, offset + i) >> (32 - kDigits)) * (1.0f / (1 << kDigits));
    T v = T(from + (to - from) * u);
    return static_cast<float>(v) < to || !(from < to) ? v : T(from);
  } else {
    return T(uniform_at<R>(seed, offset, i, from, to));
  }
}

/// log(x) for a float x in (0, 1] (fdlibm's logf: x = 2^k m, m in [sqrt(1/2), sqrt(2)), log1p
/// of m - 1 by its odd series in s = f / (2 + f)); within 1 ulp. Branch-free, so a loop of it
/// vectorizes, and the same bits on every executor (Note [Box-Muller in float]).
EMBER_HOST_DEVICE inline float box_muller_log(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  const int32_t k = static_cast<int32_t>(bits - 0x3f3504f3u) >> 23;  // bits of sqrt(1/2) below
  const uint32_t m_bits = bits - (static_cast<uint32_t>(k) << 23);
  float m;
  std::memcpy(&m, &m_bits, sizeof m);
  const float f = m - 1.0f, s = f / (2.0f + f), z = s * s, w = z * z;
  const float t1 = w * (0.40000972152f + w * 0.24279078841f), t2 = z * (0.66666662693f + w * 0.28498786688f);
  const float hfsq = 0.5f * f * f, dk = static_cast<float>(k);
  return s * (hfsq + (t2 + t1)) + dk * 9.0580006145e-06f - hfsq + f + dk * 6.9313812256e-01f;
}

/// cos(2 pi t) for a float t in [0, 1): t - q/4 (q the nearest quarter, exact) is at most 1/8,
/// so the angle lies in [-pi/4, pi/4], where Cephes's sinf and cosf polynomials hold within
/// 2 ulp; the quarter picks cos, -sin, -cos or sin. Branch-free like box_muller_log.
EMBER_HOST_DEVICE inline float box_muller_cos(float t) {
  const int quarter_count = static_cast<int>(t * 4.0f + 0.5f);  // the nearest quarter, 0..4 (t >= 0)
  const float a = (t - static_cast<float>(quarter_count) * 0.25f) * 6.28318530717958647692f, z = a * a;
  const float sin_a = a + a * z * (-1.6666654611e-1f + z * (8.3321608736e-3f + z * -1.9515295891e-4f));
  const float cos_a =
      1.0f - 0.5f * z + z * z * (4.166664568298827e-2f + z * (-1.388731625493765e-3f + z * 2.443315711809948e-5f));
  // Quarters 1 and 3 take sin, 1 and 2 are negative: selected and signed by bit masks.
  const uint32_t take_sin = 0u - static_cast<uint32_t>(quarter_count & 1);
  const uint32_t negative = static_cast<uint32_t>((quarter_count + 1) & 2) << 30;
  uint32_t sin_bits, cos_bits;
  std::memcpy(&sin_bits, &sin_a, sizeof sin_bits);
  std::memcpy(&cos_bits, &cos_a, sizeof cos_bits);
  const uint32_t bits = ((sin_bits & take_sin) | (cos_bits & ~take_sin)) ^ negative;
  float out;
  std::memcpy(&out, &bits, sizeof out);
  return out;
}

// Note [Box-Muller in float]
// float draws (float, and float16/bfloat16 through float) take log and cos from the two
// functions above rather than the math library's, so that the cpu's batched loop vectorizes
// (libm's logf and cosf were half of randn's time) and every executor that runs this header
// computes the same bits from the same words. double draws keep std::log and std::cos.

/// mean + std * z, z standard normal by Box-Muller from the uniforms u1, u2 in [0, 1).
template <typename R>
EMBER_HOST_DEVICE inline R normal_from_uniforms(R u1, R u2, R mean, R std) {
  // 1 - u1 lies in (0, 1], so the log is finite.
  if constexpr (std::is_same_v<R, float>) {
    const float radius = std::sqrt(-2.0f * box_muller_log(1.0f - u1));
    return mean + std * (radius * box_muller_cos(u2));
  } else {
    R radius = std::sqrt(R(-2) * std::log(R(1) - u1));
    R z = radius * std::cos(R(6.283185307179586476925286766559) * u2);
    return mean + std * z;
  }
}

/// mean + std * z, z standard normal by Box-Muller, for element i.
template <typename R>
EMBER_HOST_DEVICE inline R normal_at(uint64_t seed, uint64_t offset, uint64_t i, R mean, R std) {
  return normal_from_uniforms<R>(philox_uniform<R>(seed, offset + 2 * i), philox_uniform<R>(seed, offset + 2 * i + 1),
                                 mean, std);
}

}  // namespace ember::detail
