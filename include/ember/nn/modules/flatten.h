// nn::Flatten: merges a range of dimensions.
#pragma once

#include "ember/nn/module.h"

namespace ember::nn {

/// Flattens dimensions start_dim..end_dim (by default all but the batch dimension).
class Flatten : public Module {
 public:
  explicit Flatten(int64_t start_dim = 1, int64_t end_dim = -1);
  Tensor forward(const Tensor& input) override;
  std::shared_ptr<Module> clone() const override;
  std::string extra_repr() const override;

  int64_t start_dim, end_dim;
};

}  // namespace ember::nn
