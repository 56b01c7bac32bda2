#include "ember/nn/modules/flatten.h"

#include "core/tensor_impl.h"
#include "nn/module_context.h"

namespace ember::nn {

Flatten::Flatten(int64_t start_dim, int64_t end_dim) : start_dim(start_dim), end_dim(end_dim) {}

Tensor Flatten::forward(const Tensor& input) {
  return detail::nn::with_module_context(*this, [&] {
    EMBER_CHECK(input.defined(), ValueError, "flatten: the input is undefined");
    if (input.dim() == 0) return input.reshape({1});
    const int64_t start = detail::wrap_dim(start_dim, input.dim()), end = detail::wrap_dim(end_dim, input.dim());
    EMBER_CHECK(start <= end, ValueError, "flatten() has invalid args: start_dim cannot come after end_dim");
    IntList shape(input.sizes().begin(), input.sizes().begin() + start);
    int64_t merged = 1;
    for (int64_t d = start; d <= end; ++d) merged *= input.size(d);
    shape.push_back(merged);
    shape.insert(shape.end(), input.sizes().begin() + end + 1, input.sizes().end());
    return input.reshape(shape);
  });
}

std::shared_ptr<Module> Flatten::clone() const {
  auto copy = std::make_shared<Flatten>(start_dim, end_dim);
  copy_state_to(*copy);
  return copy;
}

std::string Flatten::extra_repr() const { return detail::cat("start_dim=", start_dim, ", end_dim=", end_dim); }

}  // namespace ember::nn
