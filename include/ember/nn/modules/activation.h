// Element-wise activation modules.
#pragma once

#include "ember/nn/module.h"

namespace ember::nn {

/// max(x, 0).
class ReLU : public Module {
 public:
  Tensor forward(const Tensor& input) override;
  std::shared_ptr<Module> clone() const override;
};

/// 1 / (1 + exp(-x)).
class Sigmoid : public Module {
 public:
  Tensor forward(const Tensor& input) override;
  std::shared_ptr<Module> clone() const override;
};

class Tanh : public Module {
 public:
  Tensor forward(const Tensor& input) override;
  std::shared_ptr<Module> clone() const override;
};

}  // namespace ember::nn
