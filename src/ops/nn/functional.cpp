// nn::functional ops composed from tensor ops: linear, relu, dropout, mse_loss, one_hot.
#include "ember/nn/functional.h"
#include "ember/errors.h"
#include "ember/factories.h"
#include "ember/ops.h"
#include "ops/autocast.h"
#include "ops/nn/reduction.h"
#include "ops/op_entry.h"

namespace ember::nn::functional {

Tensor linear(const Tensor& input, const Tensor& weight, const Tensor& bias) {
  auto compute = [](const Tensor& input, const Tensor& weight, const Tensor& bias) {
    EMBER_CHECK(weight.dim() == 2, ValueError, "linear(): expected weight to be 2-D, but got ", weight.dim(), "-D");
    if (input.dim() == 2 && bias.defined()) return addmm(bias, input, weight.t());
    if (input.dim() == 3 && bias.defined() && input.is_contiguous() &&
        input.numel() > 0) {  // as PyTorch: one addmm, viewed back
      Tensor out = addmm(bias, input.view({-1, input.size(2)}), weight.t());
      return out.view({input.size(0), input.size(1), out.size(1)});
    }
    Tensor out = matmul(input, weight.t());
    if (bias.defined()) out.add_(bias);
    return out;
  };
  return ember::detail::op_entry({ember::detail::AutocastOp::kLinear}, compute, input, weight, bias);
}

Tensor relu(const Tensor& input) { return ember::relu(input); }

Tensor dropout(const Tensor& input, double p, bool training, std::optional<Generator> generator) {
  EMBER_CHECK(p >= 0.0 && p <= 1.0, ValueError, "dropout probability has to be between 0 and 1, but got ", p);
  if (!training || p == 0.0) return input;
  if (p == 1.0) return input * 0;
  // Keep an element where its Philox uniform is below 1 - p (torch.bernoulli(1 - p)).
  const DType draw = input.dtype() == kFloat64 ? kFloat64 : kFloat32;
  Tensor u = empty(input.sizes(), TensorOptions(draw).device(input.device())).uniform_(0.0, 1.0, std::move(generator));
  return where(u.lt(1.0 - p), input * (1.0 / (1.0 - p)), 0);
}

Tensor mse_loss(const Tensor& input, const Tensor& target, const std::string& reduction) {
  return ember::detail::op_entry(
      {ember::detail::AutocastOp::kMseLoss},
      [&](const Tensor& input, const Tensor& target) {
        const detail::Reduction r = detail::parse_reduction(reduction);
        Tensor diff = input - target;
        return detail::reduce_loss(diff * diff, r);
      },
      input, target);
}

Tensor one_hot(const Tensor& labels, int64_t num_classes) {
  EMBER_CHECK(labels.dtype() == kInt64, TypeError, "one_hot is only applicable to index tensor.");
  if (num_classes == -1) {
    EMBER_CHECK(labels.numel() > 0, ValueError, "Can not infer total number of classes from empty tensor.");
    num_classes = labels.max().item<int64_t>() + 1;
  }
  EMBER_CHECK(num_classes >= 1 || labels.numel() == 0, ValueError, "num_classes should be positive");
  if (labels.numel() > 0) {
    EMBER_CHECK(labels.min().item<int64_t>() >= 0, ValueError, "Class values must be non-negative.");
    EMBER_CHECK(labels.max().item<int64_t>() < num_classes, ValueError,
                "Class values must be smaller than num_classes.");
  }
  Tensor classes = arange(num_classes, TensorOptions(kInt64).device(labels.device()));
  return labels.unsqueeze(-1).eq(classes).to(kInt64);
}

}  // namespace ember::nn::functional
