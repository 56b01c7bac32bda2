// Bodies of the selection ops (Where, Clamp, ClampScalar), shared by every executor.
//
// Clamp follows PyTorch: a NaN input stays NaN, and when min > max every element
// becomes max (the lower bound is applied first).
#pragma once

#include "kernels/functors.h"

namespace ember::detail {

template <typename C>
struct WhereFn {
  EMBER_HOST_DEVICE C operator()(bool cond, C a, C b) const { return cond ? a : b; }
};

template <typename C>
EMBER_HOST_DEVICE inline C clamp_value(C v, C lo, C hi, bool has_lo, bool has_hi) {
  if (is_nan(v)) return v;
  C r = has_lo && v < lo ? lo : v;
  return has_hi && r > hi ? hi : r;
}

template <typename C>
struct ClampScalarFn {
  C lo, hi;
  bool has_lo, has_hi;
  EMBER_HOST_DEVICE C operator()(C v) const { return clamp_value(v, lo, hi, has_lo, has_hi); }
};

template <typename C>
struct ClampFn {
  bool has_lo, has_hi;
  EMBER_HOST_DEVICE C operator()(C v, C lo, C hi) const { return clamp_value(v, lo, hi, has_lo, has_hi); }
};

}  // namespace ember::detail
