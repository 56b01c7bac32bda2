// cuda::sleep on the driver backend: a one-thread kernel that spins on the SM clock,
// as torch.cuda._sleep does, so the stream stays busy without a host thread waiting.
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_ops.h"

namespace ember::detail::driver {
namespace {

__global__ void spin_kernel(long long cycles) {
  long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

}  // namespace

void launch_sleep(cudaStream_t stream, long long cycles) {
  spin_kernel<<<1, 1, 0, stream>>>(cycles);
  check_launch(stream);
}

}  // namespace ember::detail::driver
