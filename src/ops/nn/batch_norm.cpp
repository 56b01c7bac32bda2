// batch_norm: statistics over every dim but 1 (one BatchNormStats KernelCall in training),
// running-stat update with momentum (unbiased variance, as PyTorch), then the input
// scaled and shifted per channel.
#include "core/tensor_impl.h"
#include "ember/autograd.h"
#include "ember/errors.h"
#include "ember/nn/functional.h"
#include "ember/ops.h"
#include "kernels/loss_kernels.h"
#include "ops/launch.h"
#include "ops/recording.h"

namespace ember::nn::functional {
namespace {

void check_channels(const Tensor& t, const char* name, int64_t channels) {
  if (!t.defined()) return;
  EMBER_CHECK(t.numel() == channels, ValueError, name, " should contain ", channels, " elements not ", t.numel());
}

// A {C} tensor as a view that broadcasts over an input of `ndim` dims along dim 1.
Tensor per_channel(const Tensor& t, int64_t ndim) {
  IntList shape(static_cast<size_t>(ndim), 1);
  shape[1] = t.numel();
  return t.reshape(shape);
}

}  // namespace

Tensor batch_norm(const Tensor& input, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                  const Tensor& bias, bool training, double momentum, double eps) {
  EMBER_CHECK(input.dim() >= 2, ValueError, "batch_norm: expected input with at least 2 dims (N, C, ...), but got ",
              input.dim(), "-D");
  EMBER_CHECK(is_floating_point(input.dtype()), TypeError, "batch_norm: expected a floating point input, but got ",
              input.dtype());
  const int64_t channels = input.size(1);
  check_channels(weight, "weight", channels);
  check_channels(bias, "bias", channels);
  check_channels(running_mean, "running_mean", channels);
  check_channels(running_var, "running_var", channels);
  const int64_t count = channels > 0 ? input.numel() / channels : 0;
  Tensor mean, var;
  if (training) {
    EMBER_CHECK(count > 1, ValueError, "Expected more than 1 value per channel when training, got input size ",
                ember::detail::IntListPrinter{input.sizes()});
    Tensor x3 = input.reshape({input.size(0), channels, -1});
    mean = ember::detail::empty_on({channels}, input.dtype(), input.device());
    var = ember::detail::empty_on({channels}, input.dtype(), input.device());
    ember::detail::KernelCall call{ember::detail::OpKind::BatchNormStats,
                                   {ember::detail::make_arg(mean), ember::detail::make_arg(var)},
                                   {ember::detail::make_arg(x3)}};
    ember::detail::launch(input.device(), call);
    if (ember::detail::should_record(x3)) {
      ember::detail::record(ember::detail::Formula::VarMean, {x3}, std::vector<Tensor*>{&mean, &var});
    }
    NoGradGuard no_grad;  // the running statistics stay outside the graph
    if (running_mean.defined()) {
      Tensor& rm = const_cast<Tensor&>(running_mean);  // updated in place, as PyTorch's
      rm *= (1.0 - momentum);
      rm.add_(mean.reshape(rm.sizes()), momentum);
    }
    if (running_var.defined()) {
      Tensor& rv = const_cast<Tensor&>(running_var);
      rv *= (1.0 - momentum);
      rv.add_(var.reshape(rv.sizes()), momentum * static_cast<double>(count) / static_cast<double>(count - 1));
    }
  } else {
    EMBER_CHECK(running_mean.defined(), ValueError, "running_mean must be defined in evaluation mode");
    EMBER_CHECK(running_var.defined(), ValueError, "running_var must be defined in evaluation mode");
    mean = running_mean.reshape({channels});
    var = running_var.reshape({channels});
  }
  // y = x * scale + shift with scale = weight / sqrt(var + eps), shift = bias - mean * scale.
  Tensor scale = (var + eps).sqrt();
  scale = weight.defined() ? weight.reshape({channels}) / scale : 1.0 / scale;
  Tensor shift = mean * scale;
  shift = bias.defined() ? bias.reshape({channels}) - shift : -shift;
  Tensor out = input * per_channel(scale.to(input.dtype()), input.dim());
  out += per_channel(shift.to(input.dtype()), input.dim());
  return out;
}

}  // namespace ember::nn::functional
