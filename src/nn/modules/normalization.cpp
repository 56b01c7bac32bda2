#include "ember/nn/modules/normalization.h"

#include "ember/factories.h"
#include "ember/nn.h"
#include "ember/nn/init.h"
#include "nn/copy_module.h"
#include "nn/module_context.h"
#include "nn/python_repr.h"

namespace ember::nn {

LayerNorm::LayerNorm(std::vector<int64_t> normalized_shape, double eps, bool elementwise_affine)
    : normalized_shape(std::move(normalized_shape)), eps(eps), elementwise_affine(elementwise_affine) {
  if (elementwise_affine) {
    weight = register_parameter("weight", empty(this->normalized_shape));
    bias = register_parameter("bias", empty(this->normalized_shape));
  } else {
    register_parameter("weight", Tensor());
    register_parameter("bias", Tensor());
  }
  reset_parameters();
}

void LayerNorm::reset_parameters() {
  if (!elementwise_affine) return;
  init::ones_(weight);
  init::zeros_(bias);
}

Tensor LayerNorm::forward(const Tensor& input) {
  return detail::nn::with_module_context(
      *this, [&] { return functional::layer_norm(input, normalized_shape, weight, bias, eps); });
}

std::shared_ptr<Module> LayerNorm::clone() const {
  return detail::nn::clone_as(*this,
                              [&] { return std::make_shared<LayerNorm>(normalized_shape, eps, elementwise_affine); });
}

std::string LayerNorm::extra_repr() const {
  return detail::cat(detail::python_tuple(normalized_shape), ", eps=", detail::python_float(eps),
                     ", elementwise_affine=", detail::python_bool(elementwise_affine));
}

void LayerNorm::rebind_members(const MemberRemap& remap) {
  remap(weight);
  remap(bias);
}

}  // namespace ember::nn
