// The geometry of 2-D pooling: the MaxPool2d / AvgPool2d KernelCall payload.
#pragma once

#include <cstdint>

namespace ember::detail {

/// Pooling KernelCall contract (built by src/ops/nn/pooling.cpp, run by cpu::run_pool and the
/// driver's launch_pool):
///   inputs[0]   {N, C, H, W}, any strides, floating dtype
///   outputs[0]  {N, C, out_h, out_w} contiguous, input's dtype
///   outputs[1]  MaxPool2d only: {N, C, out_h, out_w} int64, the flat index y * W + x of
///               the chosen element (the first maximum in window order; NaN wins)
///   AvgPool2d divides by divisor_override when non-zero, else by the window clipped to
///   the padded input (count_include_pad) or to the input itself.
///
/// MaxPool2dBackward KernelCall contract (max_pool2d's input gradient; payload the
/// forward's PoolGeometry, which the driver's gather kernel walks):
///   inputs[0]   {N, C, out_h, out_w} the output's gradient, any strides, floating dtype
///   inputs[1]   {N, C, out_h, out_w} int64 indices as MaxPool2d wrote them, any strides
///   outputs[0]  {N, C, H, W} contiguous, inputs[0]'s dtype: each element the sum of the
///               gradients whose index names it, 0 elsewhere
struct PoolGeometry {
  int64_t kernel_h = 1, kernel_w = 1;
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_h = 0, pad_w = 0;
  int64_t dilation_h = 1, dilation_w = 1;
  int64_t out_h = 0, out_w = 0;
  bool count_include_pad = true;
  int64_t divisor_override = 0;
};

}  // namespace ember::detail
