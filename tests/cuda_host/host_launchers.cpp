// The launchers of the op list's cuda column (kCudaLaunchers, backends/cuda/cuda_ops.h) that the
// driver defines outside its .cu files, for the host execution layer: cuBLAS and cuFFT do not run
// here, so Matmul takes the driver's integer kernel (its loop serves every dtype on the host),
// FFT is refused, and the convolution's column transforms call the rewritten kernels directly.
#include "backends/cuda/cuda_fft_conv_kernels.h"
#include "backends/cuda/cuda_ops.h"
#include "ember/errors.h"
#include "kernels/conv_geometry.h"

namespace ember::detail::driver {

void launch_matmul(const KernelCall& call, cudaStream_t stream) { launch_integer_matmul(call, stream); }

void launch_fft(const KernelCall&, cudaStream_t) { fail<ValueError>("cuFFT is not host-run"); }

void launch_im2col(const KernelCall& call, cudaStream_t stream) {
  launch_im2col(call.inputs.at(0), call.outputs.at(0), call.payload.get<ConvGeometry>(call.op), stream);
}

void launch_col2im(const KernelCall& call, cudaStream_t stream) {
  launch_col2im(call.inputs.at(0), call.outputs.at(0), call.payload.get<ConvGeometry>(call.op), stream);
}

}  // namespace ember::detail::driver
