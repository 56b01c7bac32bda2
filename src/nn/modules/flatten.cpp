#include "ember/nn/modules/flatten.h"

#include "nn/copy_module.h"
#include "nn/module_context.h"

namespace ember::nn {

Flatten::Flatten(int64_t start_dim, int64_t end_dim) : start_dim(start_dim), end_dim(end_dim) {}

Tensor Flatten::forward(const Tensor& input) {
  return detail::nn::with_module_context(*this, [&] { return input.flatten(start_dim, end_dim); });
}

std::shared_ptr<Module> Flatten::clone() const {
  return detail::nn::clone_as(*this, [&] { return std::make_shared<Flatten>(start_dim, end_dim); });
}

std::string Flatten::extra_repr() const { return detail::cat("start_dim=", start_dim, ", end_dim=", end_dim); }

}  // namespace ember::nn
