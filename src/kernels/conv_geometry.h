// The geometry of a 2-D convolution: the Im2Col and Col2Im KernelCall payload.
#pragma once

#include <cstdint>

namespace ember::detail::nn {

/// Im2Col KernelCall contract (built by src/ops/nn/conv2d.cpp, run by cpu::run_im2col and the
/// driver's run_im2col):
///   inputs[0]  the input, sizes {N, C, H, W}, any strides, float32 or float64
///   outputs[0] the columns {N, C * kernel_h * kernel_w, out_h * out_w}, same dtype, any
///              strides along the first two dims and stride 1 along the last: row (c, i, j)
///              holds input[n, c, y*stride - pad + i*dilation, ...], 0 where that falls
///              into the padding
///   payload    a ConvGeometry
///
/// Col2Im KernelCall contract (Im2Col's adjoint, for the convolution's input gradient;
/// built by src/ops/nn/conv2d.cpp, run by cpu::run_col2im and the driver's run_col2im):
///   inputs[0]  columns {N, C * kernel_h * kernel_w, out_h * out_w}, any strides
///   outputs[0] contiguous {N, C, H, W}, the columns' dtype (float32 or float64): every
///              element is the sum of the column entries Im2Col would have copied from it
///              (0 for an element no window reads)
///   payload    a ConvGeometry
struct ConvGeometry {
  int64_t kernel_h = 1, kernel_w = 1;
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_h = 0, pad_w = 0;
  int64_t dilation_h = 1, dilation_w = 1;
  int64_t out_h = 0, out_w = 0;
};

}  // namespace ember::detail::nn
