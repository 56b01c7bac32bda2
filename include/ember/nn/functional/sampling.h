// Spatial transformers' sampling, as torch.nn.functional.affine_grid and grid_sample.
#pragma once

#include <string>

#include "ember/tensor.h"

namespace ember::nn::functional {

/// The sampling grid of a batch of affine transforms: theta {N, 2, 3} for size {N, C, H, W}
/// gives {N, H, W, 2}; theta {N, 3, 4} for size {N, C, D, H, W} gives {N, D, H, W, 3}.
/// Differentiable with respect to theta. Computed element-wise from the axes' coordinates
/// (PyTorch multiplies a materialised base grid by theta with bmm); float32 on a cuda device
/// rounds its operands to TF32 as that bmm does, under backends::cuda::matmul.allow_tf32.
Tensor affine_grid(const Tensor& theta, const IntList& size, bool align_corners = false);

/// Samples input {N, C, H, W} at grid {N, Ho, Wo, 2} (or {N, C, D, H, W} at {N, Do, Ho, Wo, 3})
/// giving {N, C, Ho, Wo} ({N, C, Do, Ho, Wo}); grid values in [-1, 1] span the input.
/// mode "bilinear" (trilinear for 5-D), "nearest" or "bicubic" (4-D only); padding_mode
/// "zeros", "border" or "reflection". Differentiable with respect to input and grid; the
/// input's gradient is deterministic on every backend (PyTorch's CUDA one uses atomics).
/// float32 and float64; float16 and bfloat16 compute in float32 and round once.
Tensor grid_sample(const Tensor& input, const Tensor& grid, const std::string& mode = "bilinear",
                   const std::string& padding_mode = "zeros", bool align_corners = false);

}  // namespace ember::nn::functional
