// The input and weight gradients of convolution and max pooling as kernel launches
// (Matmul + Col2Im, Im2Col + Matmul, MaxPool2dBackward), for the autograd formulas of conv2d and
// max_pool2d (src/autograd/formulas_nn.cpp) when no graph of the backward is recorded.
#pragma once

#include "ember/tensor.h"
#include "kernels/conv_geometry.h"
#include "kernels/pool_geometry.h"

namespace ember::detail::nn {

struct ConvGrads {
  Tensor input, weight;  // undefined when not asked for
};

/// conv2d's gradients with respect to its input {N, C, H, W} (`input_sizes`; `input` itself
/// is read only for the weight's gradient) and its weight {C_out, C/groups, kh, kw}, on
/// channel-major columns (Note [Channel-major columns] in conv2d.cpp): per group,
/// weight^T @ grad_output into columns then Col2Im; Im2Col of the input then
/// grad_output @ columns^T.
ConvGrads conv2d_backward(const Tensor& grad_output, const Tensor& input, const IntList& input_sizes,
                          const Tensor& weight, const ConvGeometry& geometry, int64_t groups, bool need_input,
                          bool need_weight);

/// max_pool2d's gradient with respect to its input {N, C, H, W}: grad_output scattered to
/// the positions `indices` (max_pool2d_with_indices' second output) name.
Tensor max_pool2d_input_grad(const Tensor& grad_output, const Tensor& indices, const IntList& input_sizes,
                             const PoolGeometry& geometry);

}  // namespace ember::detail::nn
