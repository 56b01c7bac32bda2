// The op-layer entry of the fused optimizer update (Note [Fused optimizer step]).
#pragma once

#include <vector>

#include "ember/tensor.h"
#include "kernels/optimizer_step.h"

namespace ember::detail::optim {

/// Updates params[i] (and states[i], the rule's state tensors of params[i]'s shape,
/// dtype and device) from grads[i], with tensors[i] the per-tensor values: one
/// OptimizerStep KernelCall per (device, dtype) of the parameters. Throws before any
/// update when a gradient's shape or device does not match its parameter's.
void fused_step(const StepHyper& hyper, const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                const std::vector<std::vector<Tensor>>& states, const std::vector<StepTensor>& tensors);

}  // namespace ember::detail::optim
