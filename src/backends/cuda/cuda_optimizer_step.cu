// The fused optimizer update on the driver backend (Note [Fused optimizer step] in
// kernels/optimizer_step.h): one grid-stride launch per kMaxTensors parameters. The
// tensors' pointers and per-tensor values travel in the kernel's arguments; a thread
// walks the concatenation of all of them, finding its tensor from prefix offsets.
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_device.cuh"
#include "kernels/optimizer_step.h"

namespace ember::detail::driver {
namespace {

constexpr int kMaxTensors = 24;  // keeps StepArgs well under the 4 KiB argument limit

template <typename T>
struct StepArgs {
  T* param[kMaxTensors];
  T* state0[kMaxTensors];
  T* state1[kMaxTensors];
  const T* grad[kMaxTensors];
  int64_t offsets[kMaxTensors + 1];  // offsets[i]: elements before tensor i
  StepTensor tensor[kMaxTensors];
  StepHyper hyper;
  const float* found_inf;  // nullptr, or the GradScaler's flag: skip when not 0
  int count;
};

template <typename T>
__global__ void optimizer_step_kernel(StepArgs<T> a) {
  using C = compute_t<T>;
  if (a.found_inf != nullptr && *a.found_inf != 0.0f) return;
  const int64_t total = a.offsets[a.count];
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  int t = 0;
  for (int64_t index = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; index < total; index += stride) {
    while (index >= a.offsets[t + 1]) ++t;  // indices only grow, so t only moves forward
    const int64_t j = index - a.offsets[t];
    const StepTensor tensor = resolve_step(a.hyper, a.tensor[t]);
    C p = convert<C>(a.param[t][j]);
    const C g = convert<C>(a.grad[t][j]);
    if (a.hyper.rule == UpdateRule::SGD) {
      C buf = a.state0[t] ? convert<C>(a.state0[t][j]) : C(0);
      sgd_element<C>(a.hyper, tensor.first_step, p, g, &buf);
      if (a.state0[t]) a.state0[t][j] = convert<T>(buf);
    } else {
      C m = convert<C>(a.state0[t][j]), v = convert<C>(a.state1[t][j]);
      adam_element<C>(a.hyper, tensor, p, g, m, v);
      a.state0[t][j] = convert<T>(m);
      a.state1[t][j] = convert<T>(v);
    }
    a.param[t][j] = convert<T>(p);
  }
}

template <typename T>
void launch_group(const KernelCall& call, const FusedStep& step, cudaStream_t stream) {
  const int per_tensor = 1 + step.state_count();
  const int n = static_cast<int>(step.tensors.size());
  for (int first = 0; first < n; first += kMaxTensors) {
    StepArgs<T> a{};
    a.hyper = step.hyper;
    a.found_inf = step.skip_if_found_inf ? static_cast<const float*>(call.inputs.back().data) : nullptr;
    a.count = std::min(kMaxTensors, n - first);
    a.offsets[0] = 0;
    for (int k = 0; k < a.count; ++k) {
      const int i = first + k;
      a.param[k] = static_cast<T*>(call.outputs[per_tensor * i].data);
      a.state0[k] = per_tensor > 1 ? static_cast<T*>(call.outputs[per_tensor * i + 1].data) : nullptr;
      a.state1[k] = per_tensor > 2 ? static_cast<T*>(call.outputs[per_tensor * i + 2].data) : nullptr;
      a.grad[k] = static_cast<const T*>(call.inputs[i].data);
      a.tensor[k] = step.tensors[i];
      a.offsets[k + 1] = a.offsets[k] + call.inputs[i].numel();
    }
    if (a.offsets[a.count] == 0) continue;
    optimizer_step_kernel<T><<<grid_blocks(a.offsets[a.count]), kThreads, 0, stream>>>(a);
    check_launch(stream);
  }
}

}  // namespace

void launch_optimizer_step(const KernelCall& call, cudaStream_t stream) {
  const auto& step = call.payload.get<FusedStep>(call.op);
  if (step.tensors.empty()) return;
  dispatch_if<FloatType>(call.inputs[0].dtype, "optimizer_step", [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch_group<T>(call, step, stream);
  });
}

}  // namespace ember::detail::driver
