// Grid sampling's launches (PyTorch's grid_sampler_2d / grid_sampler_3d and their backward):
// argument checks and one KernelCall each, not recorded (src/nn/functional/sampling.cpp makes
// them a custom Function). Contracts in kernels/grid_sample_kernels.h.
#pragma once

#include <utility>

#include "ember/tensor.h"

namespace ember::detail {

/// PyTorch's aten::grid_sampler checks: devices, dtypes, batch sizes, the grid's last dim,
/// non-empty spatial dims, 4-D or 5-D, bicubic 4-D only. `interpolation` and `padding` as
/// PyTorch numbers them (bilinear 0, nearest 1, bicubic 2; zeros 0, border 1, reflection 2).
void check_grid_sampler(const Tensor& input, const Tensor& grid, int64_t interpolation);

/// The sampled output {N, C, grid's spatial sizes}.
Tensor grid_sampler(const Tensor& input, const Tensor& grid, int64_t interpolation, int64_t padding,
                    bool align_corners);

/// (grad of input, grad of grid), each only where asked for (else undefined); deterministic
/// (Note [Deterministic grid_sample backward]).
std::pair<Tensor, Tensor> grid_sampler_backward(const Tensor& grad_output, const Tensor& input, const Tensor& grid,
                                                int64_t interpolation, int64_t padding, bool align_corners,
                                                bool input_grad, bool grid_grad);

}  // namespace ember::detail
