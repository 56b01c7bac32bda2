// The fused optimizer update: one KernelCall updates every parameter of a group.
//
// Note [Fused optimizer step]
// An OptimizerStep KernelCall (built by src/optim/fused_step.cpp, run by
// cpu::run_optimizer_step and the driver's launch_optimizer_step) carries, for tensor i
// of the group:
//   outputs[k*i .. k*i+k-1]  param_i, then its state: SGD with momentum: momentum_buffer;
//                            Adam/AdamW: exp_avg, exp_avg_sq (k = 1, 2 or 3)
//   inputs[i]                grad_i
// Every operand is a dense, contiguous 1-D run of real elements of one dtype (float16,
// bfloat16, float32 or float64; a complex tensor is passed as its real view, twice the
// elements), so the kernel walks them flat. The op layer guarantees the layout
// ("Gradient layout" in fused_step.cpp). `payload` is a FusedStep: the rule's
// hyper-parameters and per-tensor values computed on the host (Adam's step size and
// bias correction from each tensor's own step count; SGD's "first step" flag, on which
// the momentum buffer is set to the gradient instead of updated).
//
// With `skip_if_found_inf` (mixed precision's GradScaler, Note [Scaler steps on the device] in
// src/optim/grad_scaler.cpp) one more input follows the gradients: a float32 found-inf flag on
// the group's device; when it is not 0 the kernel changes nothing, decided where it runs, so
// no host synchronisation and a captured step skips on replay.
//
// The element rules are PyTorch's single-tensor updates, term by term in the same
// order and in the compute type (float for 16-bit types), so results agree with
// torch.optim to float rounding.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "ember/half.h"

namespace ember::detail {

enum class UpdateRule : uint8_t { SGD, Adam };

struct StepHyper {
  UpdateRule rule = UpdateRule::SGD;
  double lr = 0;
  double weight_decay = 0;
  bool maximize = false;
  // SGD
  double momentum = 0, dampening = 0;
  bool nesterov = false;
  // Adam / AdamW
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  bool decoupled_weight_decay = false;  // AdamW
};

struct StepTensor {
  double step_size = 0;              // Adam: lr / (1 - beta1^step)
  double bias_correction2_sqrt = 1;  // Adam: sqrt(1 - beta2^step)
  bool first_step = false;           // SGD: momentum buffer starts as the gradient
  // capturable: the tensor's step count in device memory (float32, already incremented
  // by the step), read when the kernel runs; the three values above then come from it
  // (resolve_step), so a replayed graph's step uses the count of that replay.
  const float* device_step = nullptr;
};

/// `t` with its values computed from its device step count, when it has one; as the
/// host computes them otherwise (Adam: in double), so capturable steps round the same.
EMBER_HOST_DEVICE inline StepTensor resolve_step(const StepHyper& h, StepTensor t) {
  if (t.device_step == nullptr) return t;
  const double step = static_cast<double>(*t.device_step);
  t.first_step = step == 1;
  t.step_size = h.lr / (1 - std::pow(h.beta1, step));
  t.bias_correction2_sqrt = std::sqrt(1 - std::pow(h.beta2, step));
  return t;
}

struct FusedStep {
  StepHyper hyper;
  std::vector<StepTensor> tensors;
  bool skip_if_found_inf = false;  // inputs.back(): the flag
  /// Operands per tensor in KernelCall::outputs.
  int state_count() const {
    if (hyper.rule == UpdateRule::Adam) return 2;
    return hyper.momentum != 0 ? 1 : 0;
  }
};

/// One element of torch.optim.SGD's update (C: compute type).
template <typename C>
EMBER_HOST_DEVICE inline void sgd_element(const StepHyper& h, bool first_step, C& param, C grad, C* momentum_buffer) {
  C d_p = h.maximize ? -grad : grad;
  if (h.weight_decay != 0) d_p = d_p + C(h.weight_decay) * param;  // d_p.add(param, alpha=wd)
  if (h.momentum != 0) {
    C buf = first_step ? d_p : *momentum_buffer * C(h.momentum) + C(1 - h.dampening) * d_p;
    *momentum_buffer = buf;
    d_p = h.nesterov ? d_p + C(h.momentum) * buf : buf;
  }
  param = param + C(-h.lr) * d_p;  // param.add_(d_p, alpha=-lr)
}

/// One element of torch.optim.Adam's (and AdamW's) update.
template <typename C>
EMBER_HOST_DEVICE inline void adam_element(const StepHyper& h, const StepTensor& t, C& param, C grad, C& exp_avg,
                                           C& exp_avg_sq) {
  if (h.maximize) grad = -grad;
  if (h.decoupled_weight_decay) param = param * C(1 - h.lr * h.weight_decay);  // param.mul_(1 - lr * wd)
  else if (h.weight_decay != 0) grad = grad + C(h.weight_decay) * param;       // grad.add(param, alpha=wd)
  exp_avg = exp_avg * C(h.beta1) + C(1 - h.beta1) * grad;                      // mul_(b1).add_(g, alpha=1-b1)
  exp_avg_sq = exp_avg_sq * C(h.beta2) + C(1 - h.beta2) * grad * grad;         // mul_(b2).addcmul_(g, g, 1-b2)
  const C denom = std::sqrt(exp_avg_sq) / C(t.bias_correction2_sqrt) + C(h.eps);
  param = param + C(-t.step_size) * exp_avg / denom;  // addcdiv_(m, denom, -step_size)
}

}  // namespace ember::detail
