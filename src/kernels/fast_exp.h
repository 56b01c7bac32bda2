// A branch-free float exp that compilers vectorise (std::exp is an opaque libm call).
//
// Cody-Waite range reduction x = n ln2 + r with |r| <= ln2 / 2, a degree-6 polynomial
// for e^r (Cephes' expf coefficients) and 2^n built in the exponent bits. Error about
// 1 ulp over the float range; inputs below -87.3 give 0, above 88.7 give +inf, NaN
// stays NaN. Host-only: CUDA kernels use the device's __expf / expf.
#pragma once

#include <cstdint>
#include <cstring>

namespace ember::detail {

// e^x = p 2^n for |n| <= 150: returns p = e^r, r = x - n ln2 in [-ln2 / 2, ln2 / 2], and n
// (a whole number, as a float). fast_exp scales by 2^n; the cpu's sigmoid scales in two
// steps, down to the denormals (backends/cpu/cpu_vec_activations.h).
__attribute__((always_inline)) inline float fast_exp_reduced(float x, float& n) {
  // Round to nearest by the 1.5 * 2^23 trick: plain SSE2 arithmetic, so it vectorises
  // without SSE4.1's roundps.
  n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  float r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  return p * r * r + r + 1.0f;
}

__attribute__((always_inline)) inline float fast_exp(float x) {
  const float clamped = x < -87.33654f ? -87.33654f : (x > 88.72283f ? 88.72283f : x);
  float n;
  const float p = fast_exp_reduced(clamped, n);
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  float result = p * scale;
  // Past the clamps: underflow to 0, overflow to inf, NaN through.
  result = x < -87.33654f ? 0.0f : result;
  result = x > 88.72283f ? __builtin_inff() : result;
  return x != x ? x : result;
}

}  // namespace ember::detail
