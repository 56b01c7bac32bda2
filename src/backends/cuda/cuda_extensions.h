// Extension kernels of the driver backend, implemented beside their subsystems
// (cuda_fft.cpp: cuFFT, cuda_conv.cpp: im2col). Their launchers (launch_fft, launch_im2col,
// launch_col2im: the op list's cuda column) are declared with the others in cuda_ops.h.
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

/// The driver's create_fft_plan: a cuFFT plan (Note [cuFFT work areas]).
std::shared_ptr<const fft::Plan> create_cufft_plan(const fft::PlanKey& key, int device);

}  // namespace ember::detail::driver
