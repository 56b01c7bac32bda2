// Launchers of layer_kernels.cu (kernels that test the host execution layer).
#pragma once

namespace ember_cuda_host_test {

/// 2 blocks of 64 threads: out[0] = an unwritten shared byte, out[1 + 64 b + t] = 63 - t + b.
void shared_per_block(unsigned char* out);
/// out = each block's slice of `in` reversed, through dynamic shared memory of `threads`
/// floats; poison[b] = the bits of dynamic shared element threads - 1 + read_past before
/// the block writes any.
void reverse_through_shared(const float* in, float* out, unsigned* poison, int blocks, int threads, int read_past);
/// One block of 32 threads reading `__shared__ int partial[32]` at threadIdx.x + past.
void shared_overflow(int* out, int past);

}  // namespace ember_cuda_host_test
