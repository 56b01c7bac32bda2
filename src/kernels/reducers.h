// Reduction bodies (sum, mean, max, min, all), shared by every executor.
//
// A reducer folds elements of storage type T into a Lane (the narrow, vectorisable
// running value of one SIMD lane or thread) and lanes into an Acc (the wide value
// of a whole reduction). float sums run in float lanes over short blocks and add the
// block sums into a double Acc: fast, and exact for sums of up to 2^53 ones.
// Max/min propagate NaN like PyTorch: once a NaN is seen it stays.
#pragma once

#include <complex>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "kernels/convert.h"
#include "kernels/functors.h"

namespace ember::detail {

template <typename T>
struct SumReducer {
  using C = compute_t<T>;
  static constexpr bool kIntegral = std::is_integral_v<T>;
  using Lane = std::conditional_t<
      kIntegral, int64_t,
      std::conditional_t<is_complex_v<T>, T, std::conditional_t<std::is_same_v<C, double>, double, float>>>;
  using Acc = std::conditional_t<kIntegral, int64_t, std::conditional_t<is_complex_v<T>, std::complex<double>, double>>;
  static EMBER_HOST_DEVICE Lane lane_identity() { return Lane(0); }
  static EMBER_HOST_DEVICE Lane step(Lane l, T x) { return l + convert<Lane>(x); }
  static EMBER_HOST_DEVICE Lane lane_combine(Lane a, Lane b) { return a + b; }
  static EMBER_HOST_DEVICE Acc acc_identity() { return Acc(0); }
  static EMBER_HOST_DEVICE Acc merge(Acc a, Lane l) { return a + convert<Acc>(l); }
  static EMBER_HOST_DEVICE Acc acc_step(Acc a, T x) { return a + convert<Acc>(x); }
  static EMBER_HOST_DEVICE Acc combine(Acc a, Acc b) { return a + b; }
  static EMBER_HOST_DEVICE Acc finish(Acc a, int64_t) { return a; }
};

/// Sum divided by the count; an empty mean is NaN (0 / 0), like PyTorch.
template <typename T>
struct MeanReducer : SumReducer<T> {
  using Acc = typename SumReducer<T>::Acc;
  static EMBER_HOST_DEVICE Acc finish(Acc a, int64_t count) { return a / static_cast<Acc>(count); }
};

template <typename T, bool kMax>
struct MinMaxReducer {
  using C = compute_t<T>;
  using Lane = C;
  using Acc = C;
  static EMBER_HOST_DEVICE C identity() {
    if constexpr (std::numeric_limits<C>::has_infinity) {
      return kMax ? -std::numeric_limits<C>::infinity() : std::numeric_limits<C>::infinity();
    } else {
      return kMax ? std::numeric_limits<C>::lowest() : std::numeric_limits<C>::max();
    }
  }
  static EMBER_HOST_DEVICE C pick(C acc, C v) {
    bool take = kMax ? v > acc : v < acc;
    return (take || is_nan(v)) ? v : acc;
  }
  static EMBER_HOST_DEVICE Lane lane_identity() { return identity(); }
  static EMBER_HOST_DEVICE Lane step(Lane l, T x) { return pick(l, convert<C>(x)); }
  static EMBER_HOST_DEVICE Lane lane_combine(Lane a, Lane b) { return pick(a, b); }
  static EMBER_HOST_DEVICE Acc acc_identity() { return identity(); }
  static EMBER_HOST_DEVICE Acc merge(Acc a, Lane l) { return pick(a, l); }
  static EMBER_HOST_DEVICE Acc acc_step(Acc a, T x) { return pick(a, convert<C>(x)); }
  static EMBER_HOST_DEVICE Acc combine(Acc a, Acc b) { return pick(a, b); }
  static EMBER_HOST_DEVICE Acc finish(Acc a, int64_t) { return a; }
};

template <typename T>
using MaxReducer = MinMaxReducer<T, true>;
template <typename T>
using MinReducer = MinMaxReducer<T, false>;

template <typename T>
struct AllReducer {
  using Lane = bool;
  using Acc = bool;
  static EMBER_HOST_DEVICE bool lane_identity() { return true; }
  static EMBER_HOST_DEVICE bool step(bool l, T x) { return l & convert<bool>(x); }
  static EMBER_HOST_DEVICE bool lane_combine(bool a, bool b) { return a & b; }
  static EMBER_HOST_DEVICE bool acc_identity() { return true; }
  static EMBER_HOST_DEVICE bool merge(bool a, bool l) { return a & l; }
  static EMBER_HOST_DEVICE bool acc_step(bool a, T x) { return a & convert<bool>(x); }
  static EMBER_HOST_DEVICE bool combine(bool a, bool b) { return a & b; }
  static EMBER_HOST_DEVICE bool finish(bool a, int64_t) { return a; }
};

}  // namespace ember::detail
