// Im2Col and Col2Im on the driver backend for 1, 2 and 3 spatial dims (contracts in
// kernels/conv_geometry.h). Im2Col: one thread per column element, reading the input
// through its strides, writing the columns through theirs. Col2Im: one thread per input element, summing the column
// entries that were read from it (a gather, so no atomics and a fixed order); float16 and
// bfloat16 sum in float and round once, at the store.
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_fft_conv_kernels.h"
#include "backends/cuda/cuda_ops.h"
#include "kernels/convert.h"

namespace ember::detail::driver {
namespace {

// Spatial extents and strides are (depth, height, width) under Note [Convolution spatial
// dims]: a 2-D convolution's depth and a 1-D one's height are 1.
struct Im2ColArgs {
  int64_t channels;
  ConvSpatialExtent e;
  int64_t in_stride_n, in_stride_c;
  ConvGeometry g;
  int64_t total;                         // batch * channels * kernel volume * output positions
  int64_t col_stride_n, col_stride_row;  // the columns' strides (stride 1 along positions)
};

template <typename T>
__global__ void im2col_kernel(const T* input, T* columns, Im2ColArgs a) {
  for (int64_t index = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; index < a.total;
       index += int64_t(gridDim.x) * blockDim.x) {
    // columns[n][c][k][i][j][oz][oy][ox], row-major: peel the indices from the fastest.
    int64_t rest = index;
    const int64_t ox = rest % a.g.out_w;
    rest /= a.g.out_w;
    const int64_t oy = rest % a.g.out_h;
    rest /= a.g.out_h;
    const int64_t oz = rest % a.g.out_d;
    rest /= a.g.out_d;
    const int64_t j = rest % a.g.kernel_w;
    rest /= a.g.kernel_w;
    const int64_t i = rest % a.g.kernel_h;
    rest /= a.g.kernel_h;
    const int64_t k = rest % a.g.kernel_d;
    rest /= a.g.kernel_d;
    const int64_t c = rest % a.channels;
    const int64_t n = rest / a.channels;
    const int64_t z = oz * a.g.stride_d - a.g.pad_d + k * a.g.dilation_d;
    const int64_t y = oy * a.g.stride_h - a.g.pad_h + i * a.g.dilation_h;
    const int64_t x = ox * a.g.stride_w - a.g.pad_w + j * a.g.dilation_w;
    const int64_t row = ((c * a.g.kernel_d + k) * a.g.kernel_h + i) * a.g.kernel_w + j;
    const bool inside = z >= 0 && z < a.e.depth && y >= 0 && y < a.e.height && x >= 0 && x < a.e.width;
    columns[n * a.col_stride_n + row * a.col_stride_row + (oz * a.g.out_h + oy) * a.g.out_w + ox] =
        inside ? input[n * a.in_stride_n + c * a.in_stride_c + z * a.e.stride_d + y * a.e.stride_h + x * a.e.stride_w]
               : T(0);
  }
}

struct Col2ImArgs {
  int64_t channels;
  ConvSpatialExtent e;  // of the contiguous output
  int64_t col_stride_n, col_stride_row, col_stride_pos;
  ConvGeometry g;
  int64_t total;  // batch * channels * depth * height * width
};

// The output positions along one axis whose window reads input coordinate v at kernel
// offset k: pos * stride - pad + k * dilation == v, inside [0, out); -1 if none.
__device__ inline int64_t reading_position(int64_t v, int64_t k, int64_t stride, int64_t pad, int64_t dilation,
                                           int64_t out) {
  const int64_t t = v + pad - k * dilation;
  if (t < 0 || t % stride != 0 || t / stride >= out) return -1;
  return t / stride;
}

template <typename T>
__global__ void col2im_kernel(const T* columns, T* output, Col2ImArgs a) {
  for (int64_t index = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; index < a.total;
       index += int64_t(gridDim.x) * blockDim.x) {
    int64_t rest = index;
    const int64_t x = rest % a.e.width;
    rest /= a.e.width;
    const int64_t y = rest % a.e.height;
    rest /= a.e.height;
    const int64_t z = rest % a.e.depth;
    rest /= a.e.depth;
    const int64_t c = rest % a.channels, n = rest / a.channels;
    compute_t<T> sum = 0;  // float for float16 and bfloat16: one rounding, at the store
    for (int64_t k = 0; k < a.g.kernel_d; ++k) {
      const int64_t oz = reading_position(z, k, a.g.stride_d, a.g.pad_d, a.g.dilation_d, a.g.out_d);
      if (oz < 0) continue;
      for (int64_t i = 0; i < a.g.kernel_h; ++i) {
        const int64_t oy = reading_position(y, i, a.g.stride_h, a.g.pad_h, a.g.dilation_h, a.g.out_h);
        if (oy < 0) continue;
        for (int64_t j = 0; j < a.g.kernel_w; ++j) {
          const int64_t ox = reading_position(x, j, a.g.stride_w, a.g.pad_w, a.g.dilation_w, a.g.out_w);
          if (ox < 0) continue;
          const int64_t row = ((c * a.g.kernel_d + k) * a.g.kernel_h + i) * a.g.kernel_w + j;
          const int64_t position = (oz * a.g.out_h + oy) * a.g.out_w + ox;
          sum +=
              convert<compute_t<T>>(columns[n * a.col_stride_n + row * a.col_stride_row + position * a.col_stride_pos]);
        }
      }
    }
    output[index] = convert<T>(sum);
  }
}

}  // namespace

void launch_im2col(const TensorArg& input, const TensorArg& columns, const ConvGeometry& geometry,
                   cudaStream_t stream) {
  Im2ColArgs a{input.sizes[1],     conv_spatial_extent(input.sizes, input.strides),
               input.strides[0],   input.strides[1],
               geometry,           columns.numel(),
               columns.strides[0], columns.strides[1]};
  if (a.total == 0) return;
  const int blocks = grid_blocks(a.total);
  if (input.dtype == kFloat64)
    im2col_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<const double*>(input.data),
                                                   static_cast<double*>(columns.data), a);
  else if (input.dtype == kFloat32)
    im2col_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<const float*>(input.data),
                                                   static_cast<float*>(columns.data), a);
  else  // float16, bfloat16: a copy of their bits (zero bits are +0)
    im2col_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<const uint16_t*>(input.data),
                                                   static_cast<uint16_t*>(columns.data), a);
  check_launch(stream);
}

void launch_col2im(const TensorArg& columns, const TensorArg& output, const ConvGeometry& geometry,
                   cudaStream_t stream) {
  Col2ImArgs a{output.sizes[1],    conv_spatial_extent(output.sizes, output.strides),
               columns.strides[0], columns.strides[1],
               columns.strides[2], geometry,
               output.numel()};
  if (a.total == 0) return;
  const int blocks = grid_blocks(a.total);
  if (output.dtype == kFloat64)
    col2im_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<const double*>(columns.data),
                                                   static_cast<double*>(output.data), a);
  else if (output.dtype == kFloat32)
    col2im_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<const float*>(columns.data),
                                                   static_cast<float*>(output.data), a);
  else if (output.dtype == kFloat16)
    col2im_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<const Half*>(columns.data),
                                                   static_cast<Half*>(output.data), a);
  else
    col2im_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<const BFloat16*>(columns.data),
                                                   static_cast<BFloat16*>(output.data), a);
  check_launch(stream);
}

}  // namespace ember::detail::driver
