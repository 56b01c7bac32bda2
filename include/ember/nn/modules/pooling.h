// 2-D pooling modules.
#pragma once

#include <optional>

#include "ember/nn/module.h"
#include "ember/nn/size2.h"

namespace ember::nn {

/// torch.nn.MaxPool2d; stride defaults to the kernel size.
class MaxPool2d : public Module {
 public:
  explicit MaxPool2d(Size2 kernel_size, std::optional<Size2> stride = std::nullopt, Size2 padding = 0,
                     Size2 dilation = 1, bool ceil_mode = false);
  Tensor forward(const Tensor& input) override;
  std::shared_ptr<Module> clone() const override;
  std::string extra_repr() const override;

  Size2 kernel_size, stride, padding, dilation;
  bool ceil_mode;
};

/// torch.nn.AvgPool2d; stride defaults to the kernel size.
class AvgPool2d : public Module {
 public:
  explicit AvgPool2d(Size2 kernel_size, std::optional<Size2> stride = std::nullopt, Size2 padding = 0,
                     bool ceil_mode = false, bool count_include_pad = true);
  Tensor forward(const Tensor& input) override;
  std::shared_ptr<Module> clone() const override;
  std::string extra_repr() const override;

  Size2 kernel_size, stride, padding;
  bool ceil_mode, count_include_pad;
};

}  // namespace ember::nn
