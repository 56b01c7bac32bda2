// Scalar: a number of any category (bool, integer, floating, complex).
#pragma once

#include <complex>
#include <cstdint>
#include <type_traits>

#include "ember/dtype.h"

namespace ember {

class Scalar {
 public:
  enum class Kind : int8_t { Bool, Int, Float, Complex };

  Scalar() : Scalar(int64_t{0}) {}
  Scalar(bool v) : kind_(Kind::Bool) { i_ = v; }  // NOLINT
  template <typename T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>, int> = 0>
  Scalar(T v) : kind_(Kind::Int) {
    i_ = static_cast<int64_t>(v);
  }  // NOLINT
  template <typename T, std::enable_if_t<std::is_floating_point_v<T>, int> = 0>
  Scalar(T v) : kind_(Kind::Float) {
    d_ = static_cast<double>(v);
  }                                                      // NOLINT
  Scalar(Half v) : Scalar(static_cast<float>(v)) {}      // NOLINT
  Scalar(BFloat16 v) : Scalar(static_cast<float>(v)) {}  // NOLINT
  template <typename T>
  Scalar(std::complex<T> v) : kind_(Kind::Complex) {
    d_ = v.real();
    im_ = v.imag();
  }  // NOLINT

  Kind kind() const noexcept { return kind_; }
  bool is_bool() const noexcept { return kind_ == Kind::Bool; }
  bool is_integral() const noexcept { return kind_ == Kind::Int; }
  bool is_floating_point() const noexcept { return kind_ == Kind::Float; }
  bool is_complex() const noexcept { return kind_ == Kind::Complex; }

  /// The dtype a tensor made from this scalar gets: bool, int64, float32 (default), complex64.
  DType dtype() const noexcept;

  /// Converts to T (C++ conversion rules; complex to real keeps the real part).
  template <typename T>
  T to() const {
    if constexpr (std::is_same_v<T, std::complex<float>> || std::is_same_v<T, std::complex<double>>) {
      using R = typename T::value_type;
      if (kind_ == Kind::Complex) return T(static_cast<R>(d_), static_cast<R>(im_));
      return T(static_cast<R>(to<double>()), R(0));
    } else if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
      return T(to<float>());
    } else {
      switch (kind_) {
        case Kind::Bool:
        case Kind::Int: return static_cast<T>(i_);
        default: return static_cast<T>(d_);
      }
    }
  }
  double to_double() const { return to<double>(); }
  std::complex<double> to_complex() const { return to<std::complex<double>>(); }

 private:
  Kind kind_;
  union {
    int64_t i_;
    double d_;
  };
  double im_ = 0;
};

}  // namespace ember
