// Element-wise activation modules.
#pragma once

#include <string>

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

/// x * Phi(x), Phi the standard normal CDF; approximate "tanh" uses PyTorch's tanh
/// approximation. Another `approximate` is a ValueError.
class GELU : public Module {
 public:
  explicit GELU(std::string approximate = "none");
  Tensor forward(const Tensor& input) override;
  std::shared_ptr<Module> clone() const override;
  std::string extra_repr() const override;

  std::string approximate;
};

}  // namespace ember::nn
