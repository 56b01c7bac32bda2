// The few autograd operations nn::Module needs, in one place.
#pragma once

#include "ember/tensor.h"

namespace ember::detail::nn {

/// Sets requires_grad on a parameter.
void set_requires_grad(Tensor& t, bool requires_grad);
/// Clears a parameter's gradient: undefined (set_to_none) or zeroed in place.
void clear_grad(Tensor& t, bool set_to_none);
/// The gradient of `t`, or an undefined tensor.
Tensor grad_of(const Tensor& t);
/// `t` detached from the graph, sharing its storage (state_dict()'s entries).
Tensor detached(const Tensor& t);
bool requires_grad_of(const Tensor& t);
/// Whether `t` has no grad_fn (made by the user, not computed by a recorded op).
bool is_leaf(const Tensor& t);
/// Whether `t` keeps its gradient in grad() after backward (retain_grad()).
bool retains_grad(const Tensor& t);

/// Turns gradient recording off for its scope.
class NoGrad {
 public:
  NoGrad();
  ~NoGrad();
  NoGrad(const NoGrad&) = delete;
  NoGrad& operator=(const NoGrad&) = delete;

 private:
  bool previous_;
};

}  // namespace ember::detail::nn
