// nn::LayerNorm (torch.nn.LayerNorm).
#pragma once

#include <vector>

#include "ember/nn/module.h"

namespace ember::nn {

/// Normalizes over the last normalized_shape.size() dimensions (mean 0, biased variance 1,
/// plus eps), then scales by weight (ones) and shifts by bias (zeros) when
/// elementwise_affine, as PyTorch's.
class LayerNorm : public Module {
 public:
  /// As PyTorch's: any shape is accepted, an empty one or a zero size included (forward
  /// refuses an empty one, as F.layer_norm); a negative size is a ValueError ("Trying to
  /// create tensor with negative dimension") when elementwise_affine makes the parameters.
  explicit LayerNorm(std::vector<int64_t> normalized_shape, double eps = 1e-5, bool elementwise_affine = true);
  /// The input's trailing dimensions must be normalized_shape (a ValueError otherwise).
  Tensor forward(const Tensor& input) override;
  std::shared_ptr<Module> clone() const override;
  std::string extra_repr() const override;
  void reset_parameters();

  std::vector<int64_t> normalized_shape;
  double eps;
  bool elementwise_affine;
  Tensor weight, bias;  // undefined without elementwise_affine

 protected:
  void rebind_members(const MemberRemap& remap) override;
};

}  // namespace ember::nn
