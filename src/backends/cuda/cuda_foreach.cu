// OpKind::ForeachMul on the driver backend: one grid-stride launch per kMaxTensors
// tensors scales them all by the single element of in0, read on the device (no sync). As
// cuda_optimizer_step.cu, the pointers and prefix offsets travel in the kernel's arguments.
// Mixed precision's AmpNonFiniteCheckAndUnscale walks the gradients the same way, and
// AmpUpdateScale is one thread.
#include <type_traits>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_device.cuh"
#include "kernels/amp_kernels.h"

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
struct UnscaleArgs {
  T* data[kMaxTensors];
  int64_t offsets[kMaxTensors + 1];
  const float* inv_scale;
  float* found_inf;
  int count;
};

template <typename T>
__global__ void check_and_unscale_kernel(UnscaleArgs<T> a) {
  using C = std::conditional_t<std::is_same_v<T, double>, double, float>;  // PyTorch's opmath type
  const float inv_scale = *a.inv_scale;
  const int64_t total = a.offsets[a.count];
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  int t = 0;
  for (int64_t index = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; index < total; index += stride) {
    while (index >= a.offsets[t + 1]) ++t;
    T& x = a.data[t][index - a.offsets[t]];
    const C value = convert<C>(x);
    if (!isfinite(value)) *a.found_inf = 1.0f;  // every writer stores the same value
    x = convert<T>(inv_scale == 1.0f ? value : value * C(inv_scale));
  }
}

__global__ void update_scale_kernel(float* scale, int32_t* growth_tracker, const float* found_inf, float growth_factor,
                                    float backoff_factor, int32_t growth_interval) {
  amp_update_scale(*scale, *growth_tracker, *found_inf, growth_factor, backoff_factor, growth_interval);
}

template <typename T>
void launch_check_and_unscale(const KernelCall& call, cudaStream_t stream) {
  const int n = static_cast<int>(call.outputs.size()) - 1;  // out0 is the flag
  for (int first = 0; first < n; first += kMaxTensors) {
    UnscaleArgs<T> a{};
    a.inv_scale = static_cast<const float*>(call.inputs[0].data);
    a.found_inf = static_cast<float*>(call.outputs[0].data);
    a.count = std::min(kMaxTensors, n - first);
    a.offsets[0] = 0;
    for (int k = 0; k < a.count; ++k) {
      a.data[k] = static_cast<T*>(call.outputs[1 + first + k].data);
      a.offsets[k + 1] = a.offsets[k] + call.outputs[1 + first + k].numel();
    }
    if (a.offsets[a.count] == 0) continue;
    check_and_unscale_kernel<T><<<grid_blocks(a.offsets[a.count]), kThreads, 0, stream>>>(a);
    check_launch(stream);
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

void launch_amp_check_and_unscale(const KernelCall& call, cudaStream_t stream) {
  if (call.outputs.size() < 2) return;
  dispatch_if<FloatType>(call.outputs[1].dtype, "_amp_foreach_non_finite_check_and_unscale_", [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch_check_and_unscale<T>(call, stream);
  });
}

void launch_amp_update_scale(const KernelCall& call, cudaStream_t stream) {
  update_scale_kernel<<<1, 1, 0, stream>>>(static_cast<float*>(call.outputs[0].data),
                                           static_cast<int32_t*>(call.outputs[1].data),
                                           static_cast<const float*>(call.inputs[0].data),
                                           static_cast<float>(call.arg<kargs::AmpUpdateScale>().growth_factor),
                                           static_cast<float>(call.arg<kargs::AmpUpdateScale>().backoff_factor),
                                           static_cast<int32_t>(call.arg<kargs::AmpUpdateScale>().growth_interval));
  check_launch(stream);
}

}  // namespace ember::detail::driver
