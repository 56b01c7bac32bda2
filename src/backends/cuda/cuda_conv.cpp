// launch_im2col and launch_col2im (KernelCall) on the driver backend. The convolution's products are Matmul KernelCalls
// that the driver runs through cuBLAS with kargs::Matmul::allow_tf32 taken from
// backends.cudnn.allow_tf32 (Note [Convolution TF32] in src/ops/nn/convolution.cpp), so cuDNN's
// TF32 switch governs convolutions here as it does in PyTorch without linking cuDNN.
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_extensions.h"
#include "backends/cuda/cuda_fft_conv_kernels.h"
#include "backends/cuda/cuda_ops.h"
#include "ember/errors.h"

namespace ember::detail::driver {

void launch_im2col(const KernelCall& call, cudaStream_t stream) {
  EMBER_ASSERT(call.inputs.size() == 1 && call.outputs.size() == 1);
  EMBER_ASSERT(call.inputs[0].dtype == kFloat32 || call.inputs[0].dtype == kFloat64);
  launch_im2col(call.inputs[0], call.outputs[0], call.payload.get<ConvGeometry>(call.op), stream);
  check_launch(stream);
}

void launch_col2im(const KernelCall& call, cudaStream_t stream) {
  EMBER_ASSERT(call.inputs.size() == 1 && call.outputs.size() == 1);
  EMBER_ASSERT(call.outputs[0].dtype == kFloat32 || call.outputs[0].dtype == kFloat64);
  launch_col2im(call.inputs[0], call.outputs[0], call.payload.get<ConvGeometry>(call.op), stream);
  check_launch(stream);
}

}  // namespace ember::detail::driver
