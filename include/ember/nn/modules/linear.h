// nn::Linear: y = x W^T + b.
#pragma once

#include "ember/nn/module.h"

namespace ember::nn {

/// torch.nn.Linear. weight [out_features, in_features] and bias [out_features] start
/// kaiming-uniform (a = sqrt(5)) and uniform(+-1/sqrt(in_features)), as PyTorch's.
class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true);
  /// Input [..., in_features] -> [..., out_features]; another last dimension is a
  /// ValueError naming the module and both shapes.
  Tensor forward(const Tensor& input) override;
  std::shared_ptr<Module> clone() const override;
  std::string extra_repr() const override;
  /// Re-draws weight and bias with the default initialisation.
  void reset_parameters();

  int64_t in_features, out_features;
  Tensor weight, bias;  // bias undefined when built without one

 protected:
  void rebind_members(const MemberRemap& remap) override;
};

}  // namespace ember::nn
