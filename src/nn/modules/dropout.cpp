#include "ember/nn/modules/dropout.h"

#include "ember/nn.h"
#include "nn/copy_module.h"
#include "nn/module_context.h"
#include "nn/python_repr.h"

namespace ember::nn {

Dropout::Dropout(double p) : p(p) {
  EMBER_CHECK(p >= 0 && p <= 1, ValueError, "dropout probability has to be between 0 and 1, but got ",
              detail::python_float(p));
}

Tensor Dropout::forward(const Tensor& input) {
  return detail::nn::with_module_context(*this, [&] { return functional::dropout(input, p, is_training()); });
}

std::shared_ptr<Module> Dropout::clone() const {
  return detail::nn::clone_as(*this, [&] { return std::make_shared<Dropout>(p); });
}

std::string Dropout::extra_repr() const { return "p=" + detail::python_float(p) + ", inplace=False"; }

}  // namespace ember::nn
