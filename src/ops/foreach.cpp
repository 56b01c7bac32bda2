// foreach_mul_: the ForeachMul launch (Note [One launch choke point]); mixed precision's gradient
// check and unscale, and its scale update (ember::amp), one launch each.
#include "ops/foreach.h"

#include <cstdint>
#include <utility>

#include "core/tensor_impl.h"
#include "ember/amp.h"
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
                "foreach_mul_: expected tensors of one device and dtype, got ", device, " ", dtype, " and ", t.device(),
                " ", t.dtype());
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

namespace ember::amp {

using detail::KernelCall;
using detail::OpKind;

namespace {
void check_flag(const Tensor& t, const char* name, const char* op) {
  EMBER_CHECK(t.defined() && t.numel() == 1, ValueError, op, ": ", name, " must be a one-element tensor.");
  EMBER_CHECK(t.dtype() == kFloat32, TypeError, op, ": ", name, " must be a float tensor.");
}
}  // namespace

void foreach_non_finite_check_and_unscale_(const std::vector<Tensor>& grads, Tensor& found_inf,
                                           const Tensor& inv_scale) {
  constexpr const char* kOp = "_amp_foreach_non_finite_check_and_unscale_";
  check_flag(found_inf, "found_inf", kOp);
  check_flag(inv_scale, "inv_scale", kOp);
  const Device device = found_inf.device();
  EMBER_CHECK(inv_scale.device() == device, ValueError, kOp, ": inv_scale (on ", inv_scale.device(),
              ") must be on the device of found_inf (", device, ")");
  for (const Tensor& g : grads) {
    if (!g.defined()) continue;
    EMBER_CHECK(g.device() == device, ValueError, kOp, ": expected every gradient on ", device,
                " (found_inf's device), got one on ", g.device());
    EMBER_CHECK(is_floating_point(g.dtype()), TypeError, kOp, ": expected floating point gradients, got ", g.dtype());
  }
  NoGradGuard no_grad;
  const Tensor flag = found_inf.is_contiguous() ? found_inf : found_inf.contiguous();
  const Tensor scale = inv_scale.reshape({}).contiguous();
  // One launch per dtype; a gradient that is not contiguous is checked and scaled through a
  // contiguous copy, written back after the launch.
  std::vector<std::pair<Tensor, Tensor>> copies;  // (gradient, its contiguous copy)
  for (DType dtype : {kFloat32, kFloat16, kBFloat16, kFloat64}) {
    KernelCall call;
    call.op = OpKind::AmpNonFiniteCheckAndUnscale;
    call.outputs.push_back(detail::make_arg(flag));
    for (const Tensor& g : grads) {
      if (!g.defined() || g.dtype() != dtype || g.numel() == 0) continue;
      Tensor dense = g;
      if (!g.is_contiguous()) {
        dense = g.contiguous();
        copies.emplace_back(g, dense);
      }
      call.outputs.push_back(detail::TensorArg{dense.impl()->data(), dtype, {dense.numel()}, {1}});
    }
    if (call.outputs.size() == 1) continue;
    call.inputs.push_back(detail::make_arg(scale));
    detail::launch(device, call);
  }
  for (auto& [grad, dense] : copies) const_cast<Tensor&>(grad).copy_(dense);
  for (const Tensor& g : grads) {
    if (g.defined() && g.numel() > 0 && g.is_contiguous()) detail::bump_version(g);
  }
  if (!found_inf.is_contiguous()) found_inf.copy_(flag);
  detail::bump_version(found_inf);
}

void update_scale_(Tensor& scale, Tensor& growth_tracker, const Tensor& found_inf, double growth_factor,
                   double backoff_factor, int64_t growth_interval) {
  constexpr const char* kOp = "_amp_update_scale_";
  check_flag(scale, "current_scale", kOp);
  check_flag(found_inf, "found_inf", kOp);
  EMBER_CHECK(growth_tracker.defined() && growth_tracker.numel() == 1, ValueError, kOp,
              ": growth_tracker must be a one-element tensor.");
  EMBER_CHECK(growth_tracker.dtype() == kInt32, TypeError, kOp, ": growth_tracker must be an int tensor.");
  EMBER_CHECK(growth_tracker.device() == scale.device() && found_inf.device() == scale.device(), ValueError, kOp,
              ": current_scale, growth_tracker and found_inf must be on one device, got ", scale.device(), ", ",
              growth_tracker.device(), " and ", found_inf.device());
  EMBER_CHECK(growth_interval > 0 && growth_interval <= INT32_MAX, ValueError, kOp,
              ": growth_interval must be a positive 32-bit integer, got ", growth_interval);
  NoGradGuard no_grad;
  KernelCall call;
  call.op = OpKind::AmpUpdateScale;
  call.outputs.push_back(detail::make_arg(scale));
  call.outputs.push_back(detail::make_arg(growth_tracker));
  call.inputs.push_back(detail::make_arg(found_inf));
  call.args = detail::kargs::AmpUpdateScale{growth_factor, backoff_factor, growth_interval};
  detail::launch(scale.device(), call);
  detail::bump_version(scale);
  detail::bump_version(growth_tracker);
}

}  // namespace ember::amp
