// The backward kernels of layer_norm and gelu as launches, for their autograd formulas
// (src/autograd/formulas_transformer.cpp) when no graph of the backward is recorded.
#pragma once

#include "ember/tensor.h"

namespace ember::detail::nn {

struct LayerNormGrads {
  Tensor input, weight, bias;  // undefined when not asked for
};

/// layer_norm's gradients over x viewed as {rows, cols} (the normalized dims flattened),
/// from the forward's saved mean and rstd {rows}: one LayerNormBackward launch.
LayerNormGrads layer_norm_backward(const Tensor& grad_output, const Tensor& input, const Tensor& mean,
                                   const Tensor& rstd, const Tensor& weight, int64_t normalized_dims, bool need_input,
                                   bool need_weight, bool need_bias);

/// grad_output * gelu'(input): one GeluBackward launch.
Tensor gelu_backward(const Tensor& grad_output, const Tensor& input, bool approximate_tanh);
/// gelu_backward recorded as a differentiable op (GeluBackwardBackward0), for a recorded
/// backward (double backward).
Tensor gelu_backward_recorded(const Tensor& grad_output, const Tensor& input, bool approximate_tanh);

}  // namespace ember::detail::nn
