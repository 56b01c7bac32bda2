// nn::Conv2d: 2-D convolution over NCHW input.
#pragma once

#include "ember/nn/module.h"
#include "ember/nn/size2.h"

namespace ember::nn {

/// torch.nn.Conv2d (zero padding). weight [out, in / groups, kh, kw] and bias [out] start
/// kaiming-uniform (a = sqrt(5)) and uniform(+-1/sqrt(fan_in)), as PyTorch's.
class Conv2d : public Module {
 public:
  Conv2d(int64_t in_channels, int64_t out_channels, Size2 kernel_size, Size2 stride = 1, Size2 padding = 0,
         Size2 dilation = 1, int64_t groups = 1, bool bias = true);
  Tensor forward(const Tensor& input) override;
  std::shared_ptr<Module> clone() const override;
  std::string extra_repr() const override;
  void reset_parameters();

  int64_t in_channels, out_channels;
  Size2 kernel_size, stride, padding, dilation;
  int64_t groups;
  Tensor weight, bias;

 protected:
  void rebind_members(const MemberRemap& remap) override;
};

}  // namespace ember::nn
