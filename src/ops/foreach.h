// Multi-tensor ops (torch._foreach_*): one launch for a list of tensors.
#pragma once

#include <vector>

#include "ember/tensor.h"

namespace ember::detail {

/// tensors[i] *= scale for every i, in place and outside autograd, as
/// torch._foreach_mul_(tensors, scale) with a one-element tensor: the tensors share one
/// device and floating dtype; `scale` is converted to them. The contiguous tensors are
/// scaled by one ForeachMul launch (per 48 tensors on the driver backend), any other by
/// its own mul_. ValueError for tensors on several devices or of several dtypes.
void foreach_mul_(const std::vector<Tensor>& tensors, const Tensor& scale);

}  // namespace ember::detail
