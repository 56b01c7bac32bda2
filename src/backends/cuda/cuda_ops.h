// The driver's kernel families, one per .cu file, each launching asynchronously on
// `stream` with the call's device already current (DriverBackend::launch).
#pragma once

#include <cuda_runtime_api.h>

#include <iterator>

#include "kernels/kernel_call.h"

namespace ember::detail::driver {

inline constexpr int kThreads = 256;
/// Blocks for `work` items of kThreads threads on the current device, capped so that
/// grid-stride loops keep every SM busy without launching millions of blocks.
int grid_blocks(int64_t work);

void launch_copy(const KernelCall& call, cudaStream_t stream);            // Copy (cuda_copy.cu)
void launch_fill(const KernelCall& call, cudaStream_t stream);            // Fill (cuda_copy.cu)
void launch_binary(const KernelCall& call, cudaStream_t stream);          // Add Sub Mul Div Pow
void launch_scalar_op(const KernelCall& call, cudaStream_t stream);       // AddScalar ... RDivScalar
void launch_compare(const KernelCall& call, cudaStream_t stream);         // Eq ... Ge, IsClose
void launch_unary(const KernelCall& call, cudaStream_t stream);           // Neg ... Tanh
void launch_reduce(const KernelCall& call, cudaStream_t stream);          // Sum Mean Max Min All
void launch_matmul(const KernelCall& call, cudaStream_t stream);          // cuBLAS (cuda_matmul.cpp)
void launch_integer_matmul(const KernelCall& call, cudaStream_t stream);  // cuda_matmul_int.cu
void launch_index_select(const KernelCall& call, cudaStream_t stream);
void launch_generate(const KernelCall& call, cudaStream_t stream);               // Normal Uniform Arange
void launch_optimizer_step(const KernelCall& call, cudaStream_t stream);         // cuda_optimizer_step.cu
void launch_foreach_mul(const KernelCall& call, cudaStream_t stream);            // cuda_foreach.cu
void launch_amp_check_and_unscale(const KernelCall& call, cudaStream_t stream);  // cuda_foreach.cu
void launch_amp_update_scale(const KernelCall& call, cudaStream_t stream);       // cuda_foreach.cu
void launch_select(const KernelCall& call, cudaStream_t stream);                 // Where Clamp ClampScalar
void launch_softmax(const KernelCall& call, cudaStream_t stream);                // Softmax LogSoftmax
void launch_arg_reduce(const KernelCall& call, cudaStream_t stream);             // ArgMax ArgMin (cuda_softmax.cu)
void launch_pool(const KernelCall& call, cudaStream_t stream);                   // MaxPool2d AvgPool2d
void launch_max_pool_backward(const KernelCall& call, cudaStream_t stream);      // MaxPool2dBackward (cuda_pool.cu)
void launch_nll_loss(const KernelCall& call, cudaStream_t stream);               // NllLoss (cuda_loss.cu)
void launch_batch_norm_stats(const KernelCall& call, cudaStream_t stream);       // BatchNormStats (cuda_loss.cu)
void launch_cumsum(const KernelCall& call, cudaStream_t stream);                 // Cumsum (cuda_cumsum.cu)
void launch_multinomial(const KernelCall& call, cudaStream_t stream);            // Multinomial (cuda_cumsum.cu)
void launch_sort(const KernelCall& call, cudaStream_t stream);                   // Sort (cuda_sort.cu)
void launch_scatter(const KernelCall& call, cudaStream_t stream);                // Gather ScatterAdd (cuda_scatter.cu)
void launch_index_add(const KernelCall& call, cudaStream_t stream);              // IndexAdd (cuda_index_add.cu)
void launch_layer_norm(const KernelCall& call, cudaStream_t stream);             // LayerNorm (cuda_layer_norm.cu)
void launch_layer_norm_backward(const KernelCall& call, cudaStream_t stream);  // LayerNormBackward (cuda_layer_norm.cu)
void launch_gelu(const KernelCall& call, cudaStream_t stream);                 // Gelu GeluBackward (cuda_gelu.cu)
void launch_logsumexp(const KernelCall& call, cudaStream_t stream);            // LogSumExp (cuda_softmax.cu)
void launch_triangle(const KernelCall& call, cudaStream_t stream);             // Triangle (cuda_triangle.cu)
void launch_rnn_cell(const KernelCall& call, cudaStream_t stream);     // LstmCell GruCell, backward (cuda_rnn_cell.cu)
void launch_grid_sample(const KernelCall& call, cudaStream_t stream);  // GridSample, backward (cuda_grid_sample.cu)
// Beside their subsystems (cuda_extensions.h): cuFFT, and the convolution's column transforms.
void launch_fft(const KernelCall& call, cudaStream_t stream);     // FFT (cuda_fft.cpp)
void launch_im2col(const KernelCall& call, cudaStream_t stream);  // Im2Col (cuda_conv.cpp)
void launch_col2im(const KernelCall& call, cudaStream_t stream);  // Col2Im (cuda_conv.cpp)

/// The op list's cuda column (Note [The op list]): row i's launcher at index i. The driver's
/// launch() and the host-run CUDA tests (tests/cuda_host) both call through it.
using Launcher = void (*)(const KernelCall& call, cudaStream_t stream);
inline constexpr Launcher kCudaLaunchers[] = {  // the element type picks launch_im2col's KernelCall overload
#define EMBER_OP_ROW(Kind, name, Family, cpu, cuda, ...) &launch_##cuda,
    EMBER_OP_LIST
#undef EMBER_OP_ROW
};
static_assert(std::size(kCudaLaunchers) == kOpCount, "one cuda launcher per row of the op list");
/// Spins the stream for `cycles` clock cycles (torch.cuda._sleep).
void launch_sleep(cudaStream_t stream, long long cycles);

/// Forgets the calling threads' cuBLAS handles of `device` after a cudaDeviceReset.
void bump_blas_generation(int device);

}  // namespace ember::detail::driver
