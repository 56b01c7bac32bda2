// foreach_mul_: the ForeachMul launch (Note [One launch choke point]).
#include "ops/foreach.h"

#include "core/tensor_impl.h"
#include "ember/autograd.h"
#include "ember/errors.h"
#include "ops/launch.h"
#include "ops/recording.h"

namespace ember::detail {

void foreach_mul_(const std::vector<Tensor>& tensors, const Tensor& scale) {
  if (tensors.empty()) return;
  const Device device = tensors.front().device();
  const DType dtype = tensors.front().dtype();
  EMBER_CHECK(is_floating_point(dtype), TypeError, "foreach_mul_: expected floating point tensors, got ", dtype);
  EMBER_CHECK(scale.defined() && scale.numel() == 1, ValueError,
              "foreach_mul_: the scale must be a one-element tensor, got ", scale.numel(), " elements");
  for (const Tensor& t : tensors) {
    EMBER_CHECK(t.device() == device && t.dtype() == dtype, ValueError,
                "foreach_mul_: expected tensors of one device and dtype, got ", device, " ", dtype, " and ",
                t.device(), " ", t.dtype());
  }
  NoGradGuard no_grad;
  const Tensor factor = scale.reshape({}).to(TensorOptions(device).dtype(dtype)).contiguous();
  KernelCall call;
  call.op = OpKind::ForeachMul;
  for (const Tensor& t : tensors) {
    if (!t.is_contiguous()) {
      const_cast<Tensor&>(t).mul_(factor);
      continue;
    }
    call.outputs.push_back(TensorArg{t.impl()->data(), dtype, {t.numel()}, {1}});
  }
  if (call.outputs.empty()) return;
  call.inputs.push_back(make_arg(factor));
  launch(device, call);
  for (const Tensor& t : tensors) {
    if (t.is_contiguous()) bump_version(t);
  }
}

}  // namespace ember::detail
