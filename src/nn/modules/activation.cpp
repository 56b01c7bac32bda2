#include "ember/nn/modules/activation.h"

#include "ember/nn.h"
#include "ember/ops.h"
#include "nn/module_context.h"

namespace ember::nn {

Tensor ReLU::forward(const Tensor& input) {
  return detail::nn::with_module_context(*this, [&] { return relu(input); });
}
std::shared_ptr<Module> ReLU::clone() const {
  auto copy = std::make_shared<ReLU>();
  copy_state_to(*copy);
  return copy;
}

Tensor Sigmoid::forward(const Tensor& input) {
  return detail::nn::with_module_context(*this, [&] { return sigmoid(input); });
}
std::shared_ptr<Module> Sigmoid::clone() const {
  auto copy = std::make_shared<Sigmoid>();
  copy_state_to(*copy);
  return copy;
}

Tensor Tanh::forward(const Tensor& input) {
  return detail::nn::with_module_context(*this, [&] { return tanh(input); });
}
std::shared_ptr<Module> Tanh::clone() const {
  auto copy = std::make_shared<Tanh>();
  copy_state_to(*copy);
  return copy;
}

GELU::GELU(std::string approximate) : approximate(std::move(approximate)) {
  EMBER_CHECK(this->approximate == "none" || this->approximate == "tanh", ValueError,
              "approximate argument must be either none or tanh.");
}
Tensor GELU::forward(const Tensor& input) {
  return detail::nn::with_module_context(*this, [&] { return functional::gelu(input, approximate); });
}
std::shared_ptr<Module> GELU::clone() const {
  auto copy = std::make_shared<GELU>(approximate);
  copy_state_to(*copy);
  return copy;
}
std::string GELU::extra_repr() const { return "approximate='" + approximate + "'"; }

}  // namespace ember::nn
