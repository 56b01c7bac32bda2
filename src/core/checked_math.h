// Overflow-checked and wrapping int64 arithmetic for sizes, strides and offsets.
// Signed overflow is undefined behaviour: shape code combines user-given values only
// through these.
#pragma once

#include <cstdint>

namespace ember::detail {

/// *out = a * b; true when the product overflows int64 (then *out is the wrapped value).
inline bool mul_overflows(int64_t a, int64_t b, int64_t* out) noexcept { return __builtin_mul_overflow(a, b, out); }
/// *out = a + b; true when the sum overflows int64.
inline bool add_overflows(int64_t a, int64_t b, int64_t* out) noexcept { return __builtin_add_overflow(a, b, out); }
/// a * b modulo 2^64, where PyTorch's unchecked arithmetic wraps (strides of empty tensors).
inline int64_t wrapping_mul(int64_t a, int64_t b) noexcept {
  return static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
}

}  // namespace ember::detail
