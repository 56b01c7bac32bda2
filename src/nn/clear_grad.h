// Clearing a parameter's gradient, for Module::zero_grad and Optimizer::zero_grad.
#pragma once

#include "ember/autograd.h"
#include "ember/tensor.h"

namespace ember::detail::nn {

/// Clears `t`'s gradient: undefined (set_to_none) or zeroed in place.
inline void clear_grad(Tensor& t, bool set_to_none) {
  Tensor& grad = t.mutable_grad();
  if (!grad.defined()) return;
  if (set_to_none) {
    grad = Tensor();
  } else {
    NoGradGuard no_grad;
    grad = grad.detach();  // as PyTorch's zero_grad: drop any graph, then zero in place
    grad.zero_();
  }
}

}  // namespace ember::detail::nn
