// Extension kernels of the driver backend, implemented beside their subsystems
// (cuda_fft.cpp: cuFFT, cuda_conv.cpp: im2col). The driver's launch() forwards
// OpKind::FFT, OpKind::Im2Col and OpKind::Col2Im here with the device of `call.device` already
// current and `stream` the CUDA stream the op must run on (asynchronously).
#pragma once

#include <cuda_runtime_api.h>

#include <memory>

#include "kernels/kernel_call.h"

namespace ember::detail {
namespace fft {
struct PlanKey;
class Plan;
}  // namespace fft
}  // namespace ember::detail

namespace ember::detail::driver {

/// Runs an FFT KernelCall (call.payload carries the plan description) on `stream`.
void run_fft(const KernelCall& call, cudaStream_t stream);
/// The driver's create_fft_plan: a cuFFT plan (Note [cuFFT work areas]).
std::shared_ptr<const fft::Plan> create_cufft_plan(const fft::PlanKey& key, int device);
/// Runs an Im2Col KernelCall (call.payload carries the convolution geometry) on `stream`.
void run_im2col(const KernelCall& call, cudaStream_t stream);
/// Runs a Col2Im KernelCall (call.payload carries the convolution geometry) on `stream`.
void run_col2im(const KernelCall& call, cudaStream_t stream);

}  // namespace ember::detail::driver
