#include "ember/nn/modules/linear.h"

#include <cmath>

#include "ember/factories.h"
#include "ember/nn.h"
#include "ember/nn/init.h"
#include "nn/copy_module.h"
#include "nn/module_context.h"
#include "nn/python_repr.h"

namespace ember::nn {

Linear::Linear(int64_t in_features, int64_t out_features, bool with_bias)
    : in_features(in_features), out_features(out_features) {
  EMBER_CHECK(in_features >= 0 && out_features >= 0, ValueError,
              "Linear: in_features and out_features must be non-negative, but got ", in_features, " and ",
              out_features);
  weight = register_parameter("weight", empty({out_features, in_features}));
  bias = register_parameter("bias", with_bias ? empty({out_features}) : Tensor());
  reset_parameters();
}

void Linear::reset_parameters() {
  // PyTorch's Linear.reset_parameters: kaiming_uniform_(a=sqrt(5)) is uniform(+-1/sqrt(fan_in)).
  init::kaiming_uniform_(weight, std::sqrt(5.0));
  if (bias.defined()) {
    const double bound = in_features > 0 ? 1.0 / std::sqrt(static_cast<double>(in_features)) : 0.0;
    init::uniform_(bias, -bound, bound);
  }
}

Tensor Linear::forward(const Tensor& input) {
  return detail::nn::with_module_context(*this, [&] { return functional::linear(input, weight, bias); });
}

std::shared_ptr<Module> Linear::clone() const {
  return detail::nn::clone_as(*this,
                              [&] { return std::make_shared<Linear>(in_features, out_features, bias.defined()); });
}

std::string Linear::extra_repr() const {
  return detail::cat("in_features=", in_features, ", out_features=", out_features,
                     ", bias=", detail::python_bool(bias.defined()));
}

void Linear::rebind_members(const MemberRemap& remap) {
  remap(weight);
  remap(bias);
}

}  // namespace ember::nn
