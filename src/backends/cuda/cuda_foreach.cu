// OpKind::ForeachMul on the driver backend: one grid-stride launch per kMaxTensors
// tensors scales them all by the single element of in0, read on the device (no sync). As
// cuda_optimizer_step.cu, the pointers and prefix offsets travel in the kernel's arguments.
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_device.cuh"

namespace ember::detail::driver {
namespace {

constexpr int kMaxTensors = 48;  // well under the 4 KiB argument limit

template <typename T>
struct ScaleArgs {
  T* data[kMaxTensors];
  int64_t offsets[kMaxTensors + 1];  // offsets[i]: elements before tensor i
  const T* scale;
  int count;
};

template <typename T>
__global__ void foreach_mul_kernel(ScaleArgs<T> a) {
  using C = compute_t<T>;
  const C scale = convert<C>(*a.scale);
  const int64_t total = a.offsets[a.count];
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  int t = 0;
  for (int64_t index = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; index < total; index += stride) {
    while (index >= a.offsets[t + 1]) ++t;  // indices only grow, so t only moves forward
    T& x = a.data[t][index - a.offsets[t]];
    x = convert<T>(convert<C>(x) * scale);
  }
}

template <typename T>
void launch_all(const KernelCall& call, cudaStream_t stream) {
  const int n = static_cast<int>(call.outputs.size());
  for (int first = 0; first < n; first += kMaxTensors) {
    ScaleArgs<T> a{};
    a.scale = static_cast<const T*>(call.inputs[0].data);
    a.count = std::min(kMaxTensors, n - first);
    a.offsets[0] = 0;
    for (int k = 0; k < a.count; ++k) {
      a.data[k] = static_cast<T*>(call.outputs[first + k].data);
      a.offsets[k + 1] = a.offsets[k] + call.outputs[first + k].numel();
    }
    if (a.offsets[a.count] == 0) continue;
    foreach_mul_kernel<T><<<grid_blocks(a.offsets[a.count]), kThreads, 0, stream>>>(a);
    check_launch(stream);
  }
}

}  // namespace

void launch_foreach_mul(const KernelCall& call, cudaStream_t stream) {
  if (call.outputs.empty()) return;
  dispatch_if<FloatType>(call.inputs[0].dtype, "foreach_mul_", [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch_all<T>(call, stream);
  });
}

}  // namespace ember::detail::driver
