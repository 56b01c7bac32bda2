// The geometry of a 1-, 2- or 3-D convolution: the Im2Col and Col2Im KernelCall payload.
#pragma once

#include <cstdint>

namespace ember::detail {

/// Note [Convolution spatial dims]
/// One geometry serves 1, 2 and 3 spatial dims (depth, height, width): the input's spatial
/// dims are its dims after {N, C}, right-aligned, so a 2-D convolution has depth 1 and a
/// 1-D one height and depth 1, with the missing dims' kernel, stride, dilation and output
/// 1 and padding 0 (the defaults, so a 2-D geometry is written with its ten 2-D fields).
/// The kernels run one loop nest for all three; the singleton dims cost one trip each.
///
/// Im2Col KernelCall contract (built by src/ops/nn/convolution.cpp, run by cpu::run_im2col and the
/// driver's run_im2col):
///   inputs[0]  the input, sizes {N, C, [D, [H,]] W}, any strides, float32 or float64
///   outputs[0] the columns {N, C * kernel_d * kernel_h * kernel_w, out_d * out_h * out_w},
///              same dtype, any strides along the first two dims and stride 1 along the last:
///              row (c, a, i, j) holds input[n, c, z*stride_d - pad_d + a*dilation_d, ...],
///              0 where that falls into the padding
///   payload    a ConvGeometry
///
/// Col2Im KernelCall contract (Im2Col's adjoint, for the convolution's input gradient;
/// built by src/ops/nn/convolution.cpp, run by cpu::run_col2im and the driver's run_col2im):
///   inputs[0]  columns {N, C * kernel_d * kernel_h * kernel_w, out_d * out_h * out_w}, any strides
///   outputs[0] contiguous {N, C, [D, [H,]] W}, the columns' dtype (float32 or float64): every
///              element is the sum of the column entries Im2Col would have copied from it
///              (0 for an element no window reads)
///   payload    a ConvGeometry
struct ConvGeometry {
  int64_t kernel_h = 1, kernel_w = 1;
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_h = 0, pad_w = 0;
  int64_t dilation_h = 1, dilation_w = 1;
  int64_t out_h = 0, out_w = 0;
  // Depth (3-D convolutions only; Note [Convolution spatial dims]).
  int64_t kernel_d = 1, stride_d = 1, pad_d = 0, dilation_d = 1, out_d = 1;

  int64_t kernel_volume() const { return kernel_d * kernel_h * kernel_w; }
  int64_t positions() const { return out_d * out_h * out_w; }
};

/// The input's spatial extent (depth, height, width) under Note [Convolution spatial dims]:
/// sizes {N, C, spatial...} with 1 to 3 spatial dims; a missing dim has extent 1 (stride 0).
struct ConvSpatialExtent {
  int64_t depth = 1, height = 1, width = 1;
  int64_t stride_d = 0, stride_h = 0, stride_w = 0;
};

template <typename Sizes>
ConvSpatialExtent conv_spatial_extent(const Sizes& sizes, const Sizes& strides) {
  ConvSpatialExtent e;
  const auto dims = static_cast<int64_t>(sizes.size());
  e.width = sizes[dims - 1];
  e.stride_w = strides[dims - 1];
  if (dims >= 4) {
    e.height = sizes[dims - 2];
    e.stride_h = strides[dims - 2];
  }
  if (dims >= 5) {
    e.depth = sizes[dims - 3];
    e.stride_d = strides[dims - 3];
  }
  return e;
}

}  // namespace ember::detail
