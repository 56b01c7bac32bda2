// The host executor: runs a KernelCall inline on the calling thread.
#pragma once

#include "kernels/kernel_call.h"

namespace ember::detail::cpu {

/// Runs `call` to completion on host memory. Kernel failures (e.g. an index out of
/// range) throw IndexError / ValueError with PyTorch's message.
void run(const KernelCall& call);

/// Extension kernels, implemented beside their subsystems.
void run_fft(const KernelCall& call);
void run_im2col(const KernelCall& call);
void run_col2im(const KernelCall& call);
void run_optimizer_step(const KernelCall& call);
void run_foreach_mul(const KernelCall& call);
void run_amp_check_and_unscale(const KernelCall& call);  // cpu_foreach.cpp
void run_amp_update_scale(const KernelCall& call);       // cpu_foreach.cpp

}  // namespace ember::detail::cpu
