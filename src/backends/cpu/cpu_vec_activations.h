// Float sigmoid and tanh that compilers vectorise, for the fused recurrent cells' float rows
// (cpu_rnn_cell.cpp) and the float sigmoid and tanh ops (cpu_unary.cpp): std::exp and
// std::tanh are opaque libm calls, one per element, which were a fifth of an LSTM's training
// step. Branch-free (selects only), so a loop over a row
// vectorises; a file that uses them in loops compiles with no-trapping-math, as
// cpu_softmax.cpp does, so the compiler may evaluate both sides of a select.
//
// Accuracy (tests/test_vec_activations.cpp, against the float64 std:: functions): within
// 3 ulp over the whole float range, denormal results included; sigmoid(+-inf) = 1 and 0,
// tanh(+-inf) = +-1, NaN stays NaN, and tanh of a denormal is itself.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/fast_exp.h"

namespace ember::detail::cpu {

// e^x for x <= 0, with gradual underflow: below -87.3 (where fast_exp gives 0) the results are
// the denormals, 2^n applied in two halves so that each half is a normal float and only the
// last product rounds. Below -104, e^x is under half the smallest denormal: 0. NaN stays NaN.
__attribute__((always_inline)) inline float exp_nonpositive(float x) {
  const float clamped = x >= -104.0f ? x : -104.0f;  // NaN takes -104 here, and NaN below
  float n;
  const float p = fast_exp_reduced(clamped, n);
  const auto k = static_cast<int32_t>(n);  // in [-150, 0]
  const int32_t half = k >> 1;
  const int32_t bits_a = (half + 127) << 23, bits_b = (k - half + 127) << 23;
  float scale_a, scale_b;
  std::memcpy(&scale_a, &bits_a, sizeof scale_a);
  std::memcpy(&scale_b, &bits_b, sizeof scale_b);
  const float result = x < -104.0f ? 0.0f : (p * scale_a) * scale_b;
  return x != x ? x : result;
}

// sigmoid(x): with e = e^-|x| (never overflows), 1 / (1 + e) for x >= 0 and e / (1 + e) below,
// so that the tail towards -inf keeps its relative accuracy down to the denormals (where
// 1 / (1 + e^-x) rounds e^-x to inf and gives 0).
__attribute__((always_inline)) inline float vec_sigmoid(float x) {
  const float e = exp_nonpositive(-__builtin_fabsf(x));
  const float r = 1.0f / (1.0f + e);
  return x >= 0.0f ? r : e * r;  // NaN: e is NaN, so is e * r
}

// tanh(x): Cephes' tanhf. Below |x| = 0.625 an odd polynomial (x + x^3 P(x^2)); above,
// (1 - e) / (1 + e) with e = e^-2|x| (0 past |x| = 52, giving 1); the sign is x's.
__attribute__((always_inline)) inline float vec_tanh(float x) {
  const float t = __builtin_fabsf(x);
  const float e = exp_nonpositive(-2.0f * t);
  const float large = (1.0f - e) / (1.0f + e);
  const float z = t * t;
  float p = -5.70498872745e-3f;
  p = p * z + 2.06390887954e-2f;
  p = p * z - 5.37397155531e-2f;
  p = p * z + 1.33314422036e-1f;
  p = p * z - 3.33332819422e-1f;
  const float small = p * z * t + t;
  return __builtin_copysignf(t < 0.625f ? small : large, x);  // NaN: t < 0.625 is false, large is NaN
}

// The activations the fused cells' element bodies call (kernels/rnn_cell_kernels.h), for float.
struct VecCellActivations {
  __attribute__((always_inline)) static float sigmoid(float x) { return vec_sigmoid(x); }
  __attribute__((always_inline)) static float tanh(float x) { return vec_tanh(x); }
};

}  // namespace ember::detail::cpu
