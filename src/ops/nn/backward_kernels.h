// The input and weight gradients of convolution and max pooling as kernel launches
// (Matmul + Col2Im, Im2Col + Matmul, MaxPool2dBackward), for the autograd formulas of convolutions and
// max_pool2d (src/autograd/formulas_nn.cpp) when no graph of the backward is recorded.
#pragma once

#include "ember/tensor.h"
#include "kernels/conv_geometry.h"
#include "kernels/pool_geometry.h"

namespace ember::detail::nn {

struct ConvGrads {
  Tensor input, weight;  // undefined when not asked for
};

/// The geometry of a convolution over dims = kernel.size() spatial dims (1 to 3), each list
/// one value per dim, right-aligned into (depth, height, width) (Note [Convolution spatial dims]).
ConvGeometry conv_geometry(const IntList& kernel, const IntList& stride, const IntList& padding,
                           const IntList& dilation, const IntList& out);

/// A 1-, 2- or 3-D convolution's gradients with respect to its input {N, C, spatial...}
/// (`input_sizes`; `input` itself is read only for the weight's gradient) and its weight
/// {C_out, C/groups, kernel...}, on channel-major columns (Note [Channel-major columns] in
/// convolution.cpp): per group, weight^T @ grad_output into columns then Col2Im; Im2Col of
/// the input then grad_output @ columns^T.
ConvGrads convolution_backward(const Tensor& grad_output, const Tensor& input, const IntList& input_sizes,
                               const Tensor& weight, const ConvGeometry& geometry, int64_t groups, bool need_input,
                               bool need_weight);

/// max_pool2d's gradient with respect to its input {N, C, H, W}: grad_output scattered to
/// the positions `indices` (max_pool2d_with_indices' second output) name.
Tensor max_pool2d_input_grad(const Tensor& grad_output, const Tensor& indices, const IntList& input_sizes,
                             const PoolGeometry& geometry);

}  // namespace ember::detail::nn
