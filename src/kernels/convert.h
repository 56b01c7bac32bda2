// Element conversion and compute types shared by every kernel.
//
// Half and BFloat16 are stored as bits and computed in float (compute_t), as PyTorch
// does. convert<To>(from) is the one conversion rule of Copy and of every kernel store:
// complex -> real keeps the real part, floating -> integer truncates (through int64 for
// narrow integers so negative values wrap like PyTorch's c10::convert), anything -> bool
// is `!= 0`. Complex conversions use std::complex and are host-only.
#pragma once

#include <complex>
#include <cstdint>
#include <type_traits>

#include "kernels/dtype_dispatch.h"

namespace ember::detail {

template <typename T>
struct ComputeType {
  using type = T;
};
template <>
struct ComputeType<Half> {
  using type = float;
};
template <>
struct ComputeType<BFloat16> {
  using type = float;
};
/// The type a kernel computes in for storage type T.
template <typename T>
using compute_t = typename ComputeType<T>::type;

template <typename T>
struct RealType {
  using type = T;
};
template <typename T>
struct RealType<std::complex<T>> {
  using type = T;
};
/// The real type of T (complex<float> -> float).
template <typename T>
using real_t = typename RealType<T>::type;

template <typename To, typename From>
EMBER_HOST_DEVICE inline To convert(From x) {
  if constexpr (std::is_same_v<To, From>) {
    return x;
  } else if constexpr (is_reduced_float_v<From>) {
    return convert<To>(static_cast<float>(x));
  } else if constexpr (is_complex_v<From>) {
    if constexpr (is_complex_v<To>) {
      using R = typename To::value_type;
      return To(static_cast<R>(x.real()), static_cast<R>(x.imag()));
    } else if constexpr (std::is_same_v<To, bool>) {
      return x.real() != 0 || x.imag() != 0;
    } else {
      return convert<To>(x.real());
    }
  } else if constexpr (is_complex_v<To>) {
    using R = typename To::value_type;
    return To(convert<R>(x), R(0));
  } else if constexpr (std::is_same_v<To, bool>) {
    return x != From(0);
  } else if constexpr (is_reduced_float_v<To>) {
    return To(static_cast<float>(x));
  } else if constexpr (std::is_integral_v<To> && std::is_floating_point_v<From> && sizeof(To) < 8) {
    return static_cast<To>(static_cast<int64_t>(x));
  } else {
    return static_cast<To>(x);
  }
}

/// Two's complement negation without signed-overflow UB (-INT64_MIN == INT64_MIN).
template <typename T>
EMBER_HOST_DEVICE inline T wrapping_neg(T x) {
  if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(U(0) - static_cast<U>(x));
  } else {
    return -x;
  }
}

}  // namespace ember::detail
