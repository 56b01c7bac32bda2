// nn::Dropout.
#pragma once

#include "ember/nn/module.h"

namespace ember::nn {

/// In training, zeroes each element with probability p and scales the rest by 1 / (1 - p);
/// in eval mode, the identity.
class Dropout : public Module {
 public:
  explicit Dropout(double p = 0.5);
  Tensor forward(const Tensor& input) override;
  std::shared_ptr<Module> clone() const override;
  std::string extra_repr() const override;

  double p;
};

}  // namespace ember::nn
