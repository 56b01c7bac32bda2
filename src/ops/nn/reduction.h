// The `reduction` argument of the losses.
#pragma once

#include <string>

#include "ember/tensor.h"

namespace ember::nn::detail {

enum class Reduction { None, Mean, Sum };

/// "none", "mean" or "sum"; anything else is PyTorch's ValueError.
Reduction parse_reduction(const std::string& reduction);
/// The per-element losses reduced as asked (mean over all elements).
Tensor reduce_loss(const Tensor& losses, Reduction reduction);

}  // namespace ember::nn::detail
