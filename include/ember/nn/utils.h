// torch.nn.utils: gradient clipping.
#pragma once

#include <vector>

#include "ember/tensor.h"

namespace ember::nn::utils {

/// Scales the gradients of `parameters` in place so that their total norm (the norm of the
/// vector of every gradient element) is at most max_norm, as torch.nn.utils.clip_grad_norm_:
/// each gradient is multiplied by min(1, max_norm / (total_norm + 1e-6)), computed on the
/// device, without synchronizing. Parameters without a gradient are skipped; with none, the
/// result is a cpu tensor 0. `norm_type` is p of the p-norm (inf for the largest absolute
/// value; 0, as PyTorch's norm of the per-gradient norms, counts the gradients that have a
/// non-zero element). Returns the total norm (before clipping) on the first gradient's device. With
/// error_if_nonfinite, a NaN or infinite total norm is an Error with PyTorch's message (this
/// synchronizes) and leaves the gradients unchanged.
Tensor clip_grad_norm_(const std::vector<Tensor>& parameters, double max_norm, double norm_type = 2.0,
                       bool error_if_nonfinite = false);
Tensor clip_grad_norm_(const Tensor& parameter, double max_norm, double norm_type = 2.0,
                       bool error_if_nonfinite = false);

/// Clamps every gradient of `parameters` in place to [-clip_value, clip_value], as
/// torch.nn.utils.clip_grad_value_ (a NaN clip_value makes them NaN, as clamp_ with NaN
/// bounds); parameters without a gradient are skipped.
void clip_grad_value_(const std::vector<Tensor>& parameters, double clip_value);
void clip_grad_value_(const Tensor& parameter, double clip_value);

}  // namespace ember::nn::utils
