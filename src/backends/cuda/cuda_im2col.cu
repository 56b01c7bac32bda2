// Im2Col on the driver backend (contract in nn/conv_geometry.h): one thread per column
// element, reading the input through its strides, writing the columns contiguously.
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_fft_conv_kernels.h"
#include "backends/cuda/cuda_ops.h"

namespace ember::detail::driver {
namespace {

struct Im2ColArgs {
  int64_t channels, height, width;
  int64_t in_stride_n, in_stride_c, in_stride_h, in_stride_w;
  nn::ConvGeometry g;
  int64_t total;  // batch * channels * kernel_h * kernel_w * out_h * out_w
};

template <typename T>
__global__ void im2col_kernel(const T* input, T* columns, Im2ColArgs a) {
  for (int64_t index = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; index < a.total;
       index += int64_t(gridDim.x) * blockDim.x) {
    // columns[n][c][i][j][oy][ox], row-major: peel the indices from the fastest.
    int64_t rest = index;
    const int64_t ox = rest % a.g.out_w; rest /= a.g.out_w;
    const int64_t oy = rest % a.g.out_h; rest /= a.g.out_h;
    const int64_t j = rest % a.g.kernel_w; rest /= a.g.kernel_w;
    const int64_t i = rest % a.g.kernel_h; rest /= a.g.kernel_h;
    const int64_t c = rest % a.channels;
    const int64_t n = rest / a.channels;
    const int64_t y = oy * a.g.stride_h - a.g.pad_h + i * a.g.dilation_h;
    const int64_t x = ox * a.g.stride_w - a.g.pad_w + j * a.g.dilation_w;
    columns[index] = y >= 0 && y < a.height && x >= 0 && x < a.width
                         ? input[n * a.in_stride_n + c * a.in_stride_c + y * a.in_stride_h + x * a.in_stride_w]
                         : T(0);
  }
}

}  // namespace

void launch_im2col(const TensorArg& input, const TensorArg& columns, const nn::ConvGeometry& geometry,
                   cudaStream_t stream) {
  Im2ColArgs a{input.sizes[1], input.sizes[2], input.sizes[3],
               input.strides[0], input.strides[1], input.strides[2], input.strides[3],
               geometry, columns.numel()};
  if (a.total == 0) return;
  const int blocks = grid_blocks(a.total);
  if (input.dtype == kFloat64)
    im2col_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<const double*>(input.data),
                                                   static_cast<double*>(columns.data), a);
  else
    im2col_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<const float*>(input.data),
                                                   static_cast<float*>(columns.data), a);
  check_launch(stream);
}

}  // namespace ember::detail::driver
