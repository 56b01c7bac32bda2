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

/// mean + std * z, z standard normal by Box-Muller from the uniforms u1, u2 in [0, 1).
template <typename R>
EMBER_HOST_DEVICE inline R normal_from_uniforms(R u1, R u2, R mean, R std) {
  // 1 - u1 lies in (0, 1], so the log is finite.
  R radius = std::sqrt(R(-2) * std::log(R(1) - u1));
  R z = radius * std::cos(R(6.283185307179586476925286766559) * u2);
  return mean + std * z;
}

/// mean + std * z, z standard normal by Box-Muller, for element i.
template <typename R>
EMBER_HOST_DEVICE inline R normal_at(uint64_t seed, uint64_t offset, uint64_t i, R mean, R std) {
  return normal_from_uniforms<R>(philox_uniform<R>(seed, offset + 2 * i), philox_uniform<R>(seed, offset + 2 * i + 1),
                                 mean, std);
}

}  // namespace ember::detail
