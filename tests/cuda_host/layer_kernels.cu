// Kernels that test the host execution layer itself (test_cuda_kernels_on_host.cpp), in CUDA
// syntax: rewritten by rewrite_launches.py like the driver's sources, never built by nvcc.
#include <cuda_runtime_api.h>

#include "layer_kernels.h"

namespace ember_cuda_host_test {
namespace {

__global__ void shared_kernel(unsigned char* out) {
  __shared__ unsigned char tile[64];
  if (threadIdx.x == 0) out[0] = tile[5];  // never written: the poison
  __syncthreads();
  tile[threadIdx.x] = static_cast<unsigned char>(threadIdx.x + blockIdx.x);
  __syncthreads();
  out[1 + blockIdx.x * 64 + threadIdx.x] = tile[63 - threadIdx.x];
}

// Each block reverses its slice of `in` through dynamic shared memory of blockDim.x floats;
// thread 0 first reads the element past what the block writes (poison, or out of range).
__global__ void dynamic_shared_kernel(const float* in, float* out, unsigned* poison, int read_past) {
  extern __shared__ float slice[];
  if (threadIdx.x == 0) poison[blockIdx.x] = reinterpret_cast<const unsigned*>(slice)[blockDim.x - 1 + read_past];
  __syncthreads();
  slice[threadIdx.x] = in[blockIdx.x * blockDim.x + threadIdx.x];
  __syncthreads();
  out[blockIdx.x * blockDim.x + threadIdx.x] = slice[blockDim.x - 1 - threadIdx.x];
}

__global__ void shared_overflow_kernel(int* out, int past) {
  __shared__ int partial[32];
  partial[threadIdx.x] = static_cast<int>(threadIdx.x);
  __syncthreads();
  const int* p = partial;                    // through a pointer: UBSan's bounds check would stop an array index first
  out[threadIdx.x] = p[threadIdx.x + past];  // past > 0: beyond the array for the last threads
}

}  // namespace

void reverse_through_shared(const float* in, float* out, unsigned* poison, int blocks, int threads, int read_past) {
  dynamic_shared_kernel<<<blocks, threads, threads * sizeof(float)>>>(in, out, poison, read_past);
}

void shared_per_block(unsigned char* out) { shared_kernel<<<2, 64>>>(out); }

void shared_overflow(int* out, int past) { shared_overflow_kernel<<<1, 32>>>(out, past); }

}  // namespace ember_cuda_host_test
