#include "nn/autograd_shim.h"

#include "ember/autograd.h"

namespace ember::detail::nn {

void set_requires_grad(Tensor& t, bool requires_grad) { t.requires_grad_(requires_grad); }

void clear_grad(Tensor& t, bool set_to_none) {
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

Tensor grad_of(const Tensor& t) { return t.grad(); }
Tensor detached(const Tensor& t) { return t.detach(); }
bool requires_grad_of(const Tensor& t) { return t.requires_grad(); }
bool is_leaf(const Tensor& t) { return t.is_leaf(); }
bool retains_grad(const Tensor& t) { return t.retains_grad(); }

NoGrad::NoGrad() : previous_(is_grad_enabled()) { set_grad_enabled(false); }
NoGrad::~NoGrad() { set_grad_enabled(previous_); }

}  // namespace ember::detail::nn
