// The input and weight gradients of convolution and max pooling as kernel launches
// (Col2Im, Im2Col + Matmul, MaxPool2dBackward), for the autograd formulas of conv2d and
// max_pool2d (src/autograd/formulas_nn.cpp) when no graph of the backward is recorded.
#pragma once

#include "ember/tensor.h"
#include "nn/conv_geometry.h"
#include "nn/pool_geometry.h"

namespace ember::detail::nn {

/// conv2d's gradient with respect to its input {N, C, H, W} (`input_sizes`):
/// per group weight^T @ grad_output (one batched Matmul) into columns, then Col2Im.
Tensor conv2d_input_grad(const Tensor& grad_output, const Tensor& weight, const IntList& input_sizes,
                         const ConvGeometry& geometry, int64_t groups);

/// conv2d's gradient with respect to its weight {C_out, C/groups, kh, kw}: the input
/// unfolded into columns laid out {rows, N * positions}, then one Matmul per group
/// grad_output {C_out/groups, N * positions} @ columns^T.
Tensor conv2d_weight_grad(const Tensor& grad_output, const Tensor& input, const IntList& weight_sizes,
                          const ConvGeometry& geometry, int64_t groups);

/// max_pool2d's gradient with respect to its input {N, C, H, W}: grad_output scattered to
/// the positions `indices` (max_pool2d_with_indices' second output) name.
Tensor max_pool2d_input_grad(const Tensor& grad_output, const Tensor& indices, const IntList& input_sizes,
                             const PoolGeometry& geometry);

}  // namespace ember::detail::nn
