// gelu: one Gelu launch; its backward one GeluBackward launch (transformer_backward.h),
// itself a differentiable op when the backward is recorded.
#include "ember/errors.h"
#include "ember/nn/functional.h"
#include "kernels/dtype_dispatch.h"
#include "ops/launch.h"
#include "ops/nn/transformer_backward.h"
#include "ops/op_entry.h"

namespace ember::nn::functional {

Tensor gelu(const Tensor& input, const std::string& approximate) {
  EMBER_CHECK(approximate == "none" || approximate == "tanh", ValueError,
              "approximate argument must be either none or tanh.");
  EMBER_CHECK(is_floating_point(input.dtype()), TypeError, "\"GeluKernelImpl\" not implemented for '",
              detail::scalar_type_name(input.dtype()), "'");
  const bool tanh = approximate == "tanh";
  auto compute = [tanh](const Tensor& input) {
    Tensor out = detail::empty_on(input.sizes(), input.dtype(), input.device());
    if (out.numel() == 0) return out;
    detail::KernelCall call{detail::OpKind::Gelu, {detail::make_arg(out)}, {detail::make_arg(input)}};
    call.args = detail::kargs::Gelu{tanh};
    detail::launch(input.device(), call);
    return out;
  };
  return detail::op_entry({.formula = detail::Formula::Gelu, .attrs = detail::GeluArgs{tanh}}, compute, input);
}

}  // namespace ember::nn::functional

namespace ember::detail::nn {

Tensor gelu_backward(const Tensor& grad_output, const Tensor& input, bool approximate_tanh) {
  Tensor out = empty_on(input.sizes(), input.dtype(), input.device());
  if (out.numel() == 0) return out;
  KernelCall call{OpKind::GeluBackward, {make_arg(out)}, {make_arg(grad_output, input.sizes()), make_arg(input)}};
  call.args = kargs::Gelu{approximate_tanh};
  launch(input.device(), call);
  return out;
}

Tensor gelu_backward_recorded(const Tensor& grad_output, const Tensor& input, bool approximate_tanh) {
  return op_entry(
      {.formula = Formula::GeluBackward, .attrs = GeluArgs{approximate_tanh}},
      [approximate_tanh](const Tensor& grad_output, const Tensor& input) {
        return gelu_backward(grad_output, input, approximate_tanh);
      },
      grad_output, input);
}

}  // namespace ember::detail::nn
