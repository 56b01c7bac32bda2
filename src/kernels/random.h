// Per-element bodies of the random ops, shared by every executor.
//
// Element i (row-major position in the output) of a call with (seed, offset) uses
// stream index offset + i (philox.h). normal_ takes two uniforms for element i,
// stream indices offset + 2i and offset + 2i + 1, and applies Box-Muller; so a value
// depends only on (seed, offset, i): never on threads, chunking or output strides.
// Half/BFloat16/float draw float uniforms (24 bits); double draws 53-bit uniforms.
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

/// mean + std * z, z standard normal by Box-Muller, for element i.
template <typename R>
EMBER_HOST_DEVICE inline R normal_at(uint64_t seed, uint64_t offset, uint64_t i, R mean, R std) {
  R u1 = philox_uniform<R>(seed, offset + 2 * i);
  R u2 = philox_uniform<R>(seed, offset + 2 * i + 1);
  // 1 - u1 lies in (0, 1], so the log is finite.
  R radius = std::sqrt(R(-2) * std::log(R(1) - u1));
  R z = radius * std::cos(R(6.283185307179586476925286766559) * u2);
  return mean + std * z;
}

}  // namespace ember::detail
