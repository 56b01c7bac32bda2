// Checked conversion of a Scalar to an element type, as c10::checked_convert: a value
// that does not fit is refused instead of wrapped ("value cannot be converted to type
// int8_t without overflow"). Used where a user's number becomes a tensor element: fill_
// (and so zeros/ones/full), tensor() and item<T>().
#pragma once

#include <cmath>
#include <complex>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "ember/errors.h"
#include "ember/half.h"
#include "ember/scalar.h"

namespace ember::detail {

/// c10's name of T in conversion errors: int8_t, int, at::Half, c10::complex<float>, ...
template <typename T>
constexpr const char* checked_type_name() {
  if constexpr (std::is_same_v<T, bool>) return "bool";
  else if constexpr (std::is_same_v<T, uint8_t>) return "uint8_t";
  else if constexpr (std::is_same_v<T, int8_t>) return "int8_t";
  else if constexpr (std::is_same_v<T, int16_t>) return "int16_t";
  else if constexpr (std::is_same_v<T, int32_t>) return "int";
  else if constexpr (std::is_same_v<T, int64_t>) return "int64_t";
  else if constexpr (std::is_same_v<T, Half>) return "at::Half";
  else if constexpr (std::is_same_v<T, BFloat16>) return "at::BFloat16";
  else if constexpr (std::is_same_v<T, float>) return "float";
  else if constexpr (std::is_same_v<T, double>) return "double";
  else if constexpr (std::is_same_v<T, std::complex<float>>) return "c10::complex<float>";
  else return "c10::complex<double>";
}

namespace scalar_convert_impl {

template <typename T>
struct Limits {
  static constexpr double lowest = static_cast<double>(std::numeric_limits<T>::lowest());
  static constexpr double max = static_cast<double>(std::numeric_limits<T>::max());
  static constexpr bool floating = std::is_floating_point_v<T>;
};
template <>
struct Limits<Half> {
  static constexpr double lowest = -65504.0, max = 65504.0;
  static constexpr bool floating = true;
};
template <>
struct Limits<BFloat16> {
  static constexpr double lowest = -3.38953138925153547590470800371487866880e+38,
                          max = 3.38953138925153547590470800371487866880e+38;
  static constexpr bool floating = true;
};

// A real component of type R (bool/int/float/double/Half/BFloat16) from a double.
template <typename R>
bool double_overflows(double v) {
  if constexpr (Limits<R>::floating) {
    if (std::isinf(v) || std::isnan(v)) return false;  // floating types hold both
  } else {
    if (std::isnan(v)) return true;
  }
  return v < Limits<R>::lowest || v > Limits<R>::max;
}

// From an int64: unsigned targets let negative values wrap (two's complement), as c10.
template <typename R>
bool int_overflows(int64_t v) {
  if constexpr (Limits<R>::floating) {
    return static_cast<double>(v) < Limits<R>::lowest || static_cast<double>(v) > Limits<R>::max;
  } else if constexpr (std::is_unsigned_v<R>) {
    uint64_t max = static_cast<uint64_t>(std::numeric_limits<R>::max());
    return v >= 0 ? static_cast<uint64_t>(v) > max : -static_cast<uint64_t>(v) > max;
  } else {
    return v < std::numeric_limits<R>::lowest() || v > std::numeric_limits<R>::max();
  }
}

template <typename T>
struct Real {
  using type = T;
};
template <typename T>
struct Real<std::complex<T>> {
  using type = T;
};

}  // namespace scalar_convert_impl

/// True when `value` cannot become a T without overflow (c10::overflows).
template <typename T>
bool overflows(const Scalar& value) {
  namespace impl = scalar_convert_impl;
  using R = typename impl::Real<T>::type;
  constexpr bool kComplex = !std::is_same_v<R, T>;
  if constexpr (std::is_same_v<T, bool>) {
    return false;
  } else {
    if (value.is_complex()) {
      std::complex<double> c = value.to_complex();
      if (!kComplex && c.imag() != 0) return true;
      return impl::double_overflows<R>(c.real()) || impl::double_overflows<R>(c.imag());
    }
    if (value.is_floating_point()) return impl::double_overflows<R>(value.to<double>());
    return impl::int_overflows<R>(value.to<int64_t>());
  }
}

/// `value` as a T; ValueError "value cannot be converted to type int8_t without overflow".
template <typename T>
T checked_to(const Scalar& value) {
  EMBER_CHECK(!overflows<T>(value), ValueError, "value cannot be converted to type ", checked_type_name<T>(),
              " without overflow");
  return value.to<T>();
}

}  // namespace ember::detail
