// The geometry of a 2-D convolution: the Im2Col KernelCall payload.
#pragma once

#include <cstdint>

namespace ember::detail::nn {

/// Im2Col KernelCall contract (built by src/nn/conv2d.cpp, run by cpu::run_im2col and the
/// driver's run_im2col):
///   inputs[0]  the input, sizes {N, C, H, W}, any strides, float32 or float64
///   outputs[0] the columns, contiguous {N, C * kernel_h * kernel_w, out_h * out_w}, same
///              dtype: row (c, i, j) holds input[n, c, y*stride - pad + i*dilation, ...],
///              0 where that falls into the padding
///   payload    a ConvGeometry
struct ConvGeometry {
  int64_t kernel_h = 1, kernel_w = 1;
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_h = 0, pad_w = 0;
  int64_t dilation_h = 1, dilation_w = 1;
  int64_t out_h = 0, out_w = 0;
};

}  // namespace ember::detail::nn
