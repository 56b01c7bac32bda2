#include "ember/nn/modules/conv.h"

#include <cmath>

#include "ember/factories.h"
#include "ember/nn.h"
#include "ember/nn/init.h"
#include "nn/module_context.h"
#include "nn/python_repr.h"
#include "nn/copy_module.h"

namespace ember::nn {

Conv2d::Conv2d(int64_t in_channels, int64_t out_channels, Size2 kernel_size, Size2 stride, Size2 padding,
               Size2 dilation, int64_t groups, bool with_bias)
    : in_channels(in_channels),
      out_channels(out_channels),
      kernel_size(kernel_size),
      stride(stride),
      padding(padding),
      dilation(dilation),
      groups(groups) {
  EMBER_CHECK(groups > 0, ValueError, "groups must be a positive integer");
  EMBER_CHECK(in_channels % groups == 0, ValueError, "in_channels must be divisible by groups");
  EMBER_CHECK(out_channels % groups == 0, ValueError, "out_channels must be divisible by groups");
  weight = register_parameter("weight", empty({out_channels, in_channels / groups, kernel_size[0], kernel_size[1]}));
  bias = register_parameter("bias", with_bias ? empty({out_channels}) : Tensor());
  reset_parameters();
}

void Conv2d::reset_parameters() {
  init::kaiming_uniform_(weight, std::sqrt(5.0));
  if (bias.defined()) {
    const int64_t fan_in = init::calculate_fan_in_and_fan_out(weight).first;
    const double bound = fan_in > 0 ? 1.0 / std::sqrt(static_cast<double>(fan_in)) : 0.0;
    init::uniform_(bias, -bound, bound);
  }
}

Tensor Conv2d::forward(const Tensor& input) {
  return detail::nn::with_module_context(*this, [&] {
    return conv2d(input, weight, bias, stride.list(), padding.list(), dilation.list(), groups);
  });
}

std::shared_ptr<Module> Conv2d::clone() const {
  return detail::nn::clone_as(*this, [&] {
    return std::make_shared<Conv2d>(in_channels, out_channels, kernel_size, stride, padding, dilation, groups,
                                    bias.defined());
  });
}

std::string Conv2d::extra_repr() const {
  // PyTorch's _ConvNd.extra_repr: non-default settings only.
  std::string out = detail::cat(in_channels, ", ", out_channels, ", kernel_size=", kernel_size.pair_repr(),
                                ", stride=", stride.pair_repr());
  if (padding[0] != 0 || padding[1] != 0) out += ", padding=" + padding.pair_repr();
  if (dilation[0] != 1 || dilation[1] != 1) out += ", dilation=" + dilation.pair_repr();
  if (groups != 1) out += detail::cat(", groups=", groups);
  if (!bias.defined()) out += ", bias=False";
  return out;
}

void Conv2d::rebind_members(const MemberRemap& remap) {
  remap(weight);
  remap(bias);
}

}  // namespace ember::nn
