// FFT normalization on the driver backend: one scaling pass over the transform's
// contiguous output (cuFFT computes unnormalized transforms, as FFTW does).
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_fft_conv_kernels.h"
#include "backends/cuda/cuda_ops.h"

namespace ember::detail::driver {
namespace {

template <typename T>
__global__ void scale_kernel(T* data, int64_t count, T scale) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count; i += int64_t(gridDim.x) * blockDim.x)
    data[i] *= scale;
}

}  // namespace

void launch_fft_scale(void* data, int64_t count, bool is_double, double scale, cudaStream_t stream) {
  if (count == 0) return;
  const int blocks = grid_blocks(count);
  if (is_double) scale_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<double*>(data), count, scale);
  else scale_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<float*>(data), count, static_cast<float>(scale));
  check_launch(stream);
}

}  // namespace ember::detail::driver
