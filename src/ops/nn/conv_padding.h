// The spatial padding of nn::Conv1d/2d/3d's padding modes and of
// padding=kSame's odd totals.
#pragma once

#include <string>

#include "ember/tensor.h"

namespace ember::detail::nn {

/// Pads the last pad.size() / 2 dims of `input` as torch.nn.functional.pad
/// does: `pad` lists (left, right) for the last dim first; `mode` "zeros",
/// "reflect", "replicate" or "circular". Made of differentiable ops (cat,
/// index_select), so gradients and double backward follow. Reflect padding must
/// be smaller than its dim, circular no larger (PyTorch's errors).
Tensor pad_spatial(const Tensor& input, const IntList& pad, const std::string& mode);

}  // namespace ember::detail::nn
