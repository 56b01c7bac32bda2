#include "ember/nn/modules/normalization.h"

#include "ember/factories.h"
#include "ember/nn.h"
#include "ember/nn/init.h"
#include "nn/module_context.h"
#include "nn/python_repr.h"

namespace ember::nn {

LayerNorm::LayerNorm(std::vector<int64_t> normalized_shape, double eps, bool elementwise_affine)
    : normalized_shape(std::move(normalized_shape)), eps(eps), elementwise_affine(elementwise_affine) {
  EMBER_CHECK(!this->normalized_shape.empty(), ValueError, "LayerNorm: normalized_shape must not be empty");
  for (int64_t s : this->normalized_shape) {
    EMBER_CHECK(s > 0, ValueError, "LayerNorm: normalized_shape must be positive, got ",
                detail::python_tuple(this->normalized_shape));
  }
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
  auto copy = std::make_shared<LayerNorm>(normalized_shape, eps, elementwise_affine);
  copy_state_to(*copy);
  return copy;
}

std::string LayerNorm::extra_repr() const {
  return detail::cat(detail::python_tuple(normalized_shape), ", eps=", detail::python_float(eps),
                     ", elementwise_affine=", detail::python_bool(elementwise_affine));
}

}  // namespace ember::nn
