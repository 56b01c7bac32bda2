// Contracts of the transformer ops' KernelCalls (built by src/ops/index_add.cpp,
// src/ops/nn/layer_norm.cpp and src/ops/nn/gelu.cpp; run by cpu_index_add.cpp,
// cpu_layer_norm.cpp, cpu_gelu.cpp and the driver's cuda_index_add.cu, cuda_layer_norm.cu,
// cuda_gelu.cu), and GELU's element-wise bodies, written once for host and device.
//
// IndexAdd (in place)
//   outputs[0] self, any strides (0-d counts as {1}); inputs[0] the same tensor (it is read)
//   inputs[1]  {K} or 0-d int64/int32 index; inputs[2] source: self's shape with
//              sizes[dim] = K, any strides, self's dtype; kargs::IndexAdd: dim, alpha
//   self.select(dim, index[k]) += alpha * source.select(dim, k), for k = 0, 1, ... in that
//   order at every position: each element of self sums its contributions in index order on
//   every backend (no atomics), so results are deterministic. An index outside
//   [0, self.size(dim)) fails the kernel with "index out of range in self" (IndexError on
//   cpu, checked before anything is written; a device-side assert on cuda).
//
// LayerNorm
//   inputs[0] x {M, N} contiguous float; then weight {N} if parts & kLayerNormWeight, then
//   bias {N} if parts & kLayerNormBias (contiguous, x's dtype); kargs::LayerNorm: parts, eps
//   outputs[0] y {M, N}, outputs[1] mean {M}, outputs[2] rstd {M} = 1 / sqrt(var + eps)
//   (biased variance), x's dtype; statistics accumulated in double on the host, in the
//   compute type's accumulator (float, or double for float64) on the device.
//
// LayerNormBackward
//   inputs[0] grad of y {M, N}, inputs[1] x {M, N}, inputs[2] mean {M}, inputs[3] rstd {M}
//   (all contiguous), then weight {N} if parts & kLayerNormWeight
//   outputs, in this order, those that parts asks for: grad of x {M, N} (kLayerNormGradInput),
//   grad of weight {N} (kLayerNormGradWeight), grad of bias {N} (kLayerNormGradBias).
//   The weight and bias gradients sum over rows in row order (deterministic).
//
// Gelu: out = gelu(in0); GeluBackward: out = in0 * gelu'(in1) (in0 the output's gradient,
// in1 the input). flag: the tanh approximation. Float dtypes; operands share sizes.
#pragma once

#include <cmath>

#include "kernels/convert.h"

namespace ember::detail {

inline constexpr int64_t kLayerNormWeight = 1;
inline constexpr int64_t kLayerNormBias = 2;
inline constexpr int64_t kLayerNormGradInput = 4;
inline constexpr int64_t kLayerNormGradWeight = 8;
inline constexpr int64_t kLayerNormGradBias = 16;

/// GELU, exact (x * Phi(x)) or with PyTorch's tanh approximation.
template <typename C>
struct GeluFn {
  bool approximate_tanh;
  EMBER_HOST_DEVICE C operator()(C x) const {
    if (approximate_tanh) {
      const C beta = C(0.7978845608028654);  // sqrt(2 / pi)
      const C inner = beta * (x + C(0.044715) * x * x * x);
      return C(0.5) * x * (C(1) + std::tanh(inner));
    }
    return x * C(0.5) * (C(1) + std::erf(x * C(0.7071067811865476)));
  }
};

/// g * d gelu(x) / dx, as PyTorch's GeluBackward kernels.
template <typename C>
struct GeluBackwardFn {
  bool approximate_tanh;
  EMBER_HOST_DEVICE C operator()(C g, C x) const {
    if (approximate_tanh) {
      const C beta = C(0.7978845608028654), kappa = C(0.044715);
      const C x_sq = x * x;
      const C tanh_inner = std::tanh(beta * (x + kappa * x_sq * x));
      const C left = C(0.5) * x, right = C(1) + tanh_inner;
      const C left_derivative = C(0.5) * right;
      const C right_derivative = left * (C(1) - tanh_inner * tanh_inner) * beta * (C(1) + C(3) * kappa * x_sq);
      return g * (left_derivative + right_derivative);
    }
    const C cdf = C(0.5) * (C(1) + std::erf(x * C(0.7071067811865476)));
    const C pdf = std::exp(C(-0.5) * x * x) * C(0.3989422804014327);  // 1 / sqrt(2 pi)
    return g * (cdf + x * pdf);
  }
};

}  // namespace ember::detail
