// Element-wise kernel bodies, written once for every executor.
//
// Each functor is instantiated with the *compute* type C of the operands (float for
// Half/BFloat16, see convert.h) and maps compute values to a compute value (or bool
// for comparisons); the executor loads, converts and stores. operator() is
// EMBER_HOST_DEVICE so CUDA kernels reuse them. Host-only parts: std::complex math
// (the CUDA executor supplies its own complex type) and std:: math for long double.
//
// Integer division by zero: a functor cannot throw on a device, so DivFn returns 0
// for a zero divisor and the host executor checks divisors first and raises
// ZeroDivisionError, as PyTorch does on CPU. INT_MIN / -1 wraps instead of trapping.
#pragma once

#include <cmath>
#include <complex>
#include <type_traits>

#include "kernels/convert.h"

namespace ember::detail {

template <typename T>
EMBER_HOST_DEVICE inline bool is_nan(T x) {
  if constexpr (std::is_floating_point_v<T>) return x != x;
  else if constexpr (is_complex_v<T>) return x.real() != x.real() || x.imag() != x.imag();
  else return false;
}

template <typename T>
EMBER_HOST_DEVICE inline T int_div(T a, T b) {
  if (b == T(0)) return T(0);  // host checks first; see the file comment
  if constexpr (std::is_signed_v<T>) {
    if (b == T(-1)) return wrapping_neg(a);
  }
  return static_cast<T>(a / b);
}

/// Integer power by squaring; negative exponents follow PyTorch (1, +-1, else 0).
template <typename T>
EMBER_HOST_DEVICE inline T int_pow(T base, T exp) {
  if constexpr (std::is_signed_v<T>) {
    if (exp < 0) {
      if (base == T(1)) return T(1);
      if (base == T(-1)) return (exp & 1) ? T(-1) : T(1);
      return T(0);
    }
  }
  using U = std::make_unsigned_t<T>;
  U result = 1, b = static_cast<U>(base);
  for (U e = static_cast<U>(exp); e != 0; e >>= 1) {
    if (e & 1) result = static_cast<U>(result * b);
    b = static_cast<U>(b * b);
  }
  return static_cast<T>(result);
}

template <typename C>
EMBER_HOST_DEVICE inline C pow_value(C a, C b) {
  if constexpr (std::is_integral_v<C>) return int_pow(a, b);
  else return std::pow(a, b);
}

template <typename C>
EMBER_HOST_DEVICE inline C div_value(C a, C b) {
  if constexpr (std::is_integral_v<C>) return int_div(a, b);
  else return a / b;
}

// ---- binary -------------------------------------------------------------------
template <typename C>
struct AddFn {
  C alpha;
  EMBER_HOST_DEVICE C operator()(C a, C b) const { return static_cast<C>(a + alpha * b); }
};
template <typename C>
struct SubFn {
  C alpha;
  EMBER_HOST_DEVICE C operator()(C a, C b) const { return static_cast<C>(a - alpha * b); }
};
template <typename C>
struct MulFn {
  EMBER_HOST_DEVICE C operator()(C a, C b) const { return static_cast<C>(a * b); }
};
template <typename C>
struct DivFn {
  EMBER_HOST_DEVICE C operator()(C a, C b) const { return div_value(a, b); }
};
template <typename C>
struct PowFn {
  EMBER_HOST_DEVICE C operator()(C a, C b) const { return pow_value(a, b); }
};
// The floating binary ops (Note [Declaring a binary op] in op_list.h): real C only.
template <typename C>
struct Atan2Fn {
  EMBER_HOST_DEVICE C operator()(C a, C b) const { return std::atan2(a, b); }
};

// ---- tensor-scalar ------------------------------------------------------------
template <typename C>
struct AddScalarFn {
  C s;
  EMBER_HOST_DEVICE C operator()(C a) const { return static_cast<C>(a + s); }
};
template <typename C>
struct MulScalarFn {
  C s;
  EMBER_HOST_DEVICE C operator()(C a) const { return static_cast<C>(a * s); }
};
template <typename C>
struct PowScalarFn {
  C s;
  EMBER_HOST_DEVICE C operator()(C a) const { return pow_value(a, s); }
};
template <typename C>
struct RSubScalarFn {
  C s;
  EMBER_HOST_DEVICE C operator()(C a) const { return static_cast<C>(s - a); }
};
template <typename C>
struct RDivScalarFn {
  C s;
  EMBER_HOST_DEVICE C operator()(C a) const { return div_value(s, a); }
};

// ---- comparisons (bool out; ordering comparisons are for real types only) --------
template <typename C>
struct EqFn {
  EMBER_HOST_DEVICE bool operator()(C a, C b) const { return a == b; }
};
template <typename C>
struct NeFn {
  EMBER_HOST_DEVICE bool operator()(C a, C b) const { return a != b; }
};
template <typename C>
struct LtFn {
  EMBER_HOST_DEVICE bool operator()(C a, C b) const { return a < b; }
};
template <typename C>
struct LeFn {
  EMBER_HOST_DEVICE bool operator()(C a, C b) const { return a <= b; }
};
template <typename C>
struct GtFn {
  EMBER_HOST_DEVICE bool operator()(C a, C b) const { return a > b; }
};
template <typename C>
struct GeFn {
  EMBER_HOST_DEVICE bool operator()(C a, C b) const { return a >= b; }
};

/// torch.isclose: a == b, or both NaN with equal_nan, or |a - b| <= atol + |rtol * b|
/// and finite. Integers are compared in double so the difference cannot overflow.
template <typename C>
struct IsCloseFn {
  using R = std::conditional_t<is_complex_v<C>, real_t<C>, std::conditional_t<std::is_floating_point_v<C>, C, double>>;
  using V = std::conditional_t<is_complex_v<C>, C, R>;
  R atol, rtol;
  bool equal_nan;
  EMBER_HOST_DEVICE bool operator()(C a_in, C b_in) const {
    V a = static_cast<V>(a_in), b = static_cast<V>(b_in);
    if (a == b) return true;
    if (equal_nan && is_nan(a) && is_nan(b)) return true;
    R actual = std::abs(a - b);
    R allowed = atol + std::abs(rtol * b);
    return std::isfinite(actual) && actual <= allowed;
  }
};

// ---- unary --------------------------------------------------------------------
template <typename C>
struct NegFn {
  EMBER_HOST_DEVICE C operator()(C a) const { return wrapping_neg(a); }
};
/// abs; for complex C the result is the real magnitude (the executor stores it real).
template <typename C>
struct AbsFn {
  EMBER_HOST_DEVICE auto operator()(C a) const {
    if constexpr (std::is_same_v<C, bool> || std::is_unsigned_v<C>) return a;
    else if constexpr (std::is_integral_v<C>) return a < C(0) ? wrapping_neg(a) : a;
    else return std::abs(a);
  }
};
template <typename C>
struct ExpFn {
  EMBER_HOST_DEVICE C operator()(C a) const { return std::exp(a); }
};
template <typename C>
struct LogFn {
  EMBER_HOST_DEVICE C operator()(C a) const { return std::log(a); }
};
template <typename C>
struct SqrtFn {
  EMBER_HOST_DEVICE C operator()(C a) const { return std::sqrt(a); }
};
/// relu as clamp_min(0): NaN propagates, like PyTorch.
template <typename C>
struct ReluFn {
  EMBER_HOST_DEVICE C operator()(C a) const { return a < C(0) ? C(0) : a; }
};
template <typename C>
struct SigmoidFn {
  EMBER_HOST_DEVICE C operator()(C a) const { return C(1) / (C(1) + std::exp(-a)); }
};
template <typename C>
struct TanhFn {
  EMBER_HOST_DEVICE C operator()(C a) const { return std::tanh(a); }
};
/// 1 / sqrt(a) through SqrtFn, so the driver's complex SqrtFn serves complex inputs too.
template <typename C>
struct RsqrtFn {
  EMBER_HOST_DEVICE C operator()(C a) const { return C(1) / SqrtFn<C>{}(a); }
};
template <typename C>
struct ErfFn {
  EMBER_HOST_DEVICE C operator()(C a) const { return std::erf(a); }
};

/// The unary functors of real inputs only: their kernels refuse complex dtypes with
/// PyTorch's "not implemented" error instead of instantiating them.
template <template <typename> class Fn>
inline constexpr bool kRealOnlyUnary = false;
template <>
inline constexpr bool kRealOnlyUnary<ErfFn> = true;

}  // namespace ember::detail
