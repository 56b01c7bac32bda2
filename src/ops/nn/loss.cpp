// nll_loss and cross_entropy (class indices or class probabilities, label smoothing),
// as PyTorch's. nll_loss is one NllLoss KernelCall (contract in kernels/loss_kernels.h)
// plus its reduction; cross_entropy is log_softmax followed by it.
#include <cmath>

#include "core/tensor_impl.h"
#include "ember/errors.h"
#include "ember/nn/functional.h"
#include "ember/ops.h"
#include "kernels/dtype_dispatch.h"
#include "kernels/loss_kernels.h"
#include "ops/autocast.h"
#include "ops/launch.h"
#include "ops/nn/reduction.h"
#include "ops/op_entry.h"

namespace ember::nn::functional {
namespace {

using ember::detail::IntListPrinter;

void check_long_target(const Tensor& target) {
  EMBER_CHECK(target.dtype() == kInt64, TypeError, "expected scalar type Long but found ",
              ember::detail::scalar_type_name(target.dtype()));
}

// The per-element losses {target shape} and whether each counts (reduction None), or the
// reduced loss and the count (0-dim), from one kernel.
std::pair<Tensor, Tensor> nll_elements(const Tensor& input, const Tensor& target, int64_t ignore_index,
                                       detail::Reduction reduction) {
  EMBER_CHECK(input.dim() >= 1, ValueError, "input tensor should be 1D or 2D");
  check_long_target(target);
  ember::detail::check_same_device(input, target);
  Tensor x3, t2;
  if (input.dim() == 1) {
    EMBER_CHECK(target.dim() == 0, ValueError, "0D or 1D target tensor expected, multi-target not supported");
    x3 = input.reshape({1, input.size(0), 1});
    t2 = target.reshape({1, 1});
  } else {
    EMBER_CHECK(input.dim() != 2 || target.dim() <= 1, ValueError,
                "0D or 1D target tensor expected, multi-target not supported");
    EMBER_CHECK(target.dim() >= 1 && input.size(0) == target.size(0), ValueError, "Expected input batch_size (",
                input.size(0), ") to match target batch_size (", target.dim() >= 1 ? target.size(0) : 1, ").");
    IntList expected{input.size(0)};
    expected.insert(expected.end(), input.sizes().begin() + 2, input.sizes().end());
    EMBER_CHECK(target.sizes() == expected, ValueError, "Expected target size ", IntListPrinter{expected}, ", got ",
                IntListPrinter{target.sizes()});
    x3 = input.reshape({input.size(0), input.size(1), -1});
    t2 = target.reshape({input.size(0), -1});
  }
  const bool reduced = reduction != detail::Reduction::None;
  const IntList shape = reduced ? IntList{} : t2.sizes();
  Tensor loss = ember::detail::empty_on(shape, input.dtype(), input.device());
  Tensor counted = ember::detail::empty_on(shape, input.dtype(), input.device());
  if (reduced && t2.numel() == 0) {  // as PyTorch: sum 0, mean NaN
    loss.fill_(reduction == detail::Reduction::Sum ? 0.0 : NAN);
    counted.fill_(0);
    return {loss, counted};
  }
  const int64_t call_reduction = reduction == detail::Reduction::None ? 0 : reduction == detail::Reduction::Sum ? 1 : 2;
  if (t2.numel() > 0) {
    ember::detail::KernelCall call{ember::detail::OpKind::NllLoss,
                                   {ember::detail::make_arg(loss), ember::detail::make_arg(counted)},
                                   {ember::detail::make_arg(x3), ember::detail::make_arg(t2)},
                                   ember::detail::kargs::NllLoss{ignore_index, call_reduction}};
    ember::detail::launch(input.device(), call);
  }
  if (ember::detail::should_record(x3)) {
    ember::detail::NllLossArgs attrs{ignore_index, call_reduction};
    ember::detail::record(ember::detail::Formula::NllLoss, {x3, t2}, std::vector<Tensor*>{&loss, &counted},
                          std::move(attrs));
  }
  if (reduced) return {loss, counted};
  return {loss.reshape(target.sizes()), counted.reshape(target.sizes())};
}

// Per-element losses reduced as nll_loss reduces them (the mean over counted elements).
Tensor reduce_counted(const Tensor& loss, const Tensor& counted, detail::Reduction reduction) {
  switch (reduction) {
    case detail::Reduction::None: return loss;
    case detail::Reduction::Sum: return loss.sum();
    case detail::Reduction::Mean: return loss.sum() / counted.sum();
  }
  return loss;
}

}  // namespace

Tensor nll_loss(const Tensor& input, const Tensor& target, const std::string& reduction, int64_t ignore_index) {
  // The target takes part in the policy's choice but is used as given: class indices are
  // never cast.
  return ember::detail::op_entry(
      {ember::detail::AutocastOp::kNllLoss},
      [&](const Tensor& input, const Tensor& /*target*/) {
        const detail::Reduction r = detail::parse_reduction(reduction);
        return nll_elements(input, target, ignore_index, r).first;
      },
      input, target);
}

Tensor cross_entropy(const Tensor& input, const Tensor& target, const std::string& reduction, int64_t ignore_index,
                     double label_smoothing) {
  auto compute = [&](const Tensor& input, const Tensor& target) {
    const detail::Reduction r = detail::parse_reduction(reduction);
    EMBER_CHECK(label_smoothing >= 0.0 && label_smoothing <= 1.0, ValueError,
                "label_smoothing must be between 0.0 and 1.0. Got: ", label_smoothing);
    EMBER_CHECK(input.dim() >= 1, ValueError, "cross_entropy: expected input with at least 1 dim, but got 0-D");
    const int64_t class_dim = input.dim() == 1 ? 0 : 1;
    const int64_t classes = input.size(class_dim);
    Tensor logp = log_softmax(input, class_dim);
    if (is_floating_point(target.dtype()) && target.sizes() == input.sizes()) {
      // Class probabilities: -sum_c p_c log q_c, smoothed towards the uniform distribution.
      ember::detail::check_same_device(input, target);
      Tensor p = label_smoothing > 0 ? target * (1.0 - label_smoothing) + label_smoothing / static_cast<double>(classes)
                                     : target;
      Tensor loss = -(logp * p).sum(class_dim);
      if (r == detail::Reduction::Mean)
        return loss.sum() / static_cast<double>(input.numel() / std::max<int64_t>(classes, 1));
      return r == detail::Reduction::Sum ? loss.sum() : loss;
    }
    if (label_smoothing <= 0.0) return nll_elements(logp, target, ignore_index, r).first;
    // PyTorch: (1 - e) * nll + e / C * smooth, smooth = -sum_c log q_c over counted elements.
    auto [nll, counted] = nll_elements(logp, target, ignore_index, detail::Reduction::None);
    Tensor loss = reduce_counted(nll, counted, r);
    // As PyTorch, ignored elements are filled, not multiplied, with 0: their gradient stays
    // 0 when the mean's is infinite (no element counted).
    Tensor smooth = (-logp.sum(class_dim)).masked_fill(counted.eq(0), 0.0);
    smooth = reduce_counted(smooth, counted, r);
    return loss * (1.0 - label_smoothing) + smooth * (label_smoothing / static_cast<double>(classes));
  };
  return ember::detail::op_entry({ember::detail::AutocastOp::kCrossEntropy}, compute, input, target);
}

}  // namespace ember::nn::functional
