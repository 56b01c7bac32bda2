// The reduced-precision choices of a float16 / bfloat16 Matmul launch (Note [Matmul math]).
#pragma once

#include <cstdint>

#include "kernels/kernel_call.h"

namespace ember::detail {

// Note [Matmul math]
// backends::cuda::matmul's cuBLAS switches reach a Matmul launch as bits in its arguments'
// kargs::Matmul::math (0, the default, means no bits). The op layer sets
// them when it launches, from the flags of that moment, and only for float16 / bfloat16
// operands on a cuda device, in matmul's launch (ops/linalg.cpp): the cpu ignores the flags, as
// PyTorch's does, and so do convolutions and the recurrent modules' recurrence (cuDNN in
// PyTorch), whose launches carry no bits; addmm / baddbmm compute float16 and bfloat16 in
// float32 except where the bits change the product (then they take matmul's). Every backend
// reads them:
//   - the driver: kMatmulReducedReduction off sets CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION
//     on the handle, kMatmulHalfAccumulation takes CUBLAS_COMPUTE_16F (cuda_matmul.cpp);
//   - host kernels (emulated devices) emulate them (cpu_matmul.cpp): float16 accumulation
//     rounds the running sum to float16 after every multiply-add; a reduced-precision
//     reduction rounds the running sum to the output dtype after each split-k block of
//     kSplitKBlock products, where without it the whole sum is float32, rounded once.
inline constexpr int64_t kMatmulReducedReduction = 1;  // float16 / bfloat16: split-k partial sums in the output dtype
inline constexpr int64_t kMatmulHalfAccumulation = 2;  // float16: accumulate in float16 (CUBLAS_COMPUTE_16F)

/// The depth of one split-k block in the host emulation of a reduced-precision reduction.
inline constexpr int64_t kSplitKBlock = 1024;

/// The math bits (kMatmul*) of a Matmul launch.
inline int64_t matmul_math(const KernelCall& call) { return call.arg<kargs::Matmul>().math; }

}  // namespace ember::detail
