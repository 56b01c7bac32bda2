// grid_blocks: the launch geometry every grid-stride kernel of the driver backend uses
// (its own file so that the host execution layer of tests/cuda_host compiles the same
// sizing code the driver runs).
#include <algorithm>
#include <atomic>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_ops.h"

namespace ember::detail::driver {

int grid_blocks(int64_t work) {
  // Multiprocessor counts per device, read once (the attribute query is cheap but not free).
  static std::atomic<int> sm_counts[64];
  int device = 0;
  check_cuda(cudaGetDevice(&device));
  int sms = device < 64 ? sm_counts[device].load(std::memory_order_relaxed) : 0;
  if (sms == 0) {
    check_cuda(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    if (device < 64) sm_counts[device].store(sms, std::memory_order_relaxed);
  }
  int64_t wanted = (work + kThreads - 1) / kThreads;
  int64_t cap = static_cast<int64_t>(sms) * 32;  // 8192 threads per SM: full occupancy
  return static_cast<int>(std::max<int64_t>(1, std::min(wanted, cap)));
}

}  // namespace ember::detail::driver
