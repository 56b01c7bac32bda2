// Convolutions over 1, 2 and 3 spatial dims, as torch.nn.functional.conv1d /
// conv2d / conv3d.
#pragma once

#include <cstdint>

#include "ember/nn/conv_padding.h"
#include "ember/tensor.h"

namespace ember {

// The sizes (stride, padding, dilation) are one value for every spatial dim or
// one per dim. Input (N, C, *spatial) or unbatched (C, *spatial); weight
// (C_out, C / groups, *kernel); bias (C_out) or undefined. Float32 convolutions
// on cuda devices round their inputs to TF32 when backends::cudnn.allow_tf32
// (never on the cpu), as conv2d (ember/nn.h).

/// torch.nn.functional.conv1d over (N, C, L) or (C, L) input.
Tensor conv1d(const Tensor& input, const Tensor& weight, const Tensor& bias = {}, const IntList& stride = {1},
              const IntList& padding = {0}, const IntList& dilation = {1}, int64_t groups = 1);
/// torch.nn.functional.conv3d over (N, C, D, H, W) or (C, D, H, W) input.
Tensor conv3d(const Tensor& input, const Tensor& weight, const Tensor& bias = {}, const IntList& stride = {1},
              const IntList& padding = {0}, const IntList& dilation = {1}, int64_t groups = 1);

/// padding=nn::kValid (no padding) or nn::kSame (the output has the input's
/// spatial size; an even extent is padded one more on the right, as PyTorch;
/// stride must be 1).
Tensor conv1d(const Tensor& input, const Tensor& weight, const Tensor& bias, const IntList& stride,
              nn::ConvPaddingTag padding, const IntList& dilation = {1}, int64_t groups = 1);
Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias, const IntList& stride,
              nn::ConvPaddingTag padding, const IntList& dilation = {1}, int64_t groups = 1);
Tensor conv3d(const Tensor& input, const Tensor& weight, const Tensor& bias, const IntList& stride,
              nn::ConvPaddingTag padding, const IntList& dilation = {1}, int64_t groups = 1);

/// torch.nn.functional.conv_transpose1d/2d/3d: the adjoint of the convolution with the same
/// settings (its input gradient). Input (N, C_in, *spatial) or unbatched; weight
/// (C_in, C_out / groups, *kernel); each output extent is (L - 1) * stride - 2 * padding +
/// dilation * (kernel - 1) + output_padding + 1, output_padding smaller than stride or dilation.
Tensor conv_transpose1d(const Tensor& input, const Tensor& weight, const Tensor& bias = {}, const IntList& stride = {1},
                        const IntList& padding = {0}, const IntList& output_padding = {0}, int64_t groups = 1,
                        const IntList& dilation = {1});
Tensor conv_transpose2d(const Tensor& input, const Tensor& weight, const Tensor& bias = {}, const IntList& stride = {1},
                        const IntList& padding = {0}, const IntList& output_padding = {0}, int64_t groups = 1,
                        const IntList& dilation = {1});
Tensor conv_transpose3d(const Tensor& input, const Tensor& weight, const Tensor& bias = {}, const IntList& stride = {1},
                        const IntList& padding = {0}, const IntList& output_padding = {0}, int64_t groups = 1,
                        const IntList& dilation = {1});

namespace nn::functional {
using ember::conv1d;
using ember::conv3d;
using ember::conv_transpose1d;
using ember::conv_transpose2d;
using ember::conv_transpose3d;
}  // namespace nn::functional

}  // namespace ember
