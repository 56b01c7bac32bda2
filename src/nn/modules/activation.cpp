#include "ember/nn/modules/activation.h"

#include "ember/nn.h"
#include "ember/ops.h"
#include "nn/copy_module.h"
#include "nn/module_context.h"

namespace ember::nn {

Tensor ReLU::forward(const Tensor& input) {
  return detail::nn::with_module_context(*this, [&] { return relu(input); });
}
std::shared_ptr<Module> ReLU::clone() const {
  return detail::nn::clone_as(*this, [&] { return std::make_shared<ReLU>(); });
}

Tensor Sigmoid::forward(const Tensor& input) {
  return detail::nn::with_module_context(*this, [&] { return sigmoid(input); });
}
std::shared_ptr<Module> Sigmoid::clone() const {
  return detail::nn::clone_as(*this, [&] { return std::make_shared<Sigmoid>(); });
}

Tensor Tanh::forward(const Tensor& input) {
  return detail::nn::with_module_context(*this, [&] { return tanh(input); });
}
std::shared_ptr<Module> Tanh::clone() const {
  return detail::nn::clone_as(*this, [&] { return std::make_shared<Tanh>(); });
}

GELU::GELU(std::string approximate) : approximate(std::move(approximate)) {
  EMBER_CHECK(this->approximate == "none" || this->approximate == "tanh", ValueError,
              "approximate argument must be either none or tanh.");
}
Tensor GELU::forward(const Tensor& input) {
  return detail::nn::with_module_context(*this, [&] { return functional::gelu(input, approximate); });
}
std::shared_ptr<Module> GELU::clone() const {
  return detail::nn::clone_as(*this, [&] { return std::make_shared<GELU>(approximate); });
}
std::string GELU::extra_repr() const { return "approximate='" + approximate + "'"; }

}  // namespace ember::nn
