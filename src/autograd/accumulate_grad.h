// AccumulateGrad: the node that adds a leaf's gradient into its .grad.
#pragma once

#include "autograd/autograd_meta.h"

namespace ember::autograd {

/// Holds its leaf; runs on the stream that was current when the leaf was first used
/// (rule 5). Gradient Layout Contract, as PyTorch's accumulate_grad.h: a gradient stored
/// in .grad has the leaf's strides when the leaf is dense and non-overlapping, else it is
/// contiguous; an incoming gradient is stolen (not copied) only when nothing else holds
/// it and its strides already obey that contract.
class AccumulateGrad final : public Node {
 public:
  explicit AccumulateGrad(Tensor variable);
  std::string name() const override { return "AccumulateGrad"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override;
  const Tensor& variable() const noexcept { return variable_; }
  /// The leaf's register_hook() hooks applied to `grad` (also for grad(), which captures
  /// the gradient instead of accumulating it).
  Tensor run_hooks(Tensor grad) const;

 private:
  Tensor variable_;
};

/// A gradient assigned through mutable_grad() must match its tensor as PyTorch's `.grad =`
/// setter requires (checked when a backward pass accumulates into it): TypeError for
/// another dtype, Error for another device or size, with PyTorch's messages.
void check_assigned_grad(const Tensor& grad, const Tensor& variable);

/// A tensor with `like`'s sizes and, where the contract allows, its strides, holding `grad`.
Tensor clone_obeying_layout(const Tensor& grad, const Tensor& like);

}  // namespace ember::autograd
