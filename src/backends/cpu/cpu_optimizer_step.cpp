// cpu::run_optimizer_step: the fused optimizer update on the host (Note [Fused optimizer
// step] in kernels/optimizer_step.h). Each tensor's elements are split over the pool.
#include "backends/cpu/cpu_kernels.h"
#include "ember/errors.h"
#include "kernels/convert.h"
#include "kernels/optimizer_step.h"
#include "kernels/parallel.h"

namespace ember::detail::cpu {
namespace {

template <typename T>
void step_group(const KernelCall& call, const FusedStep& step) {
  using C = compute_t<T>;
  const int per_tensor = 1 + step.state_count();
  const StepHyper hyper = step.hyper;
  for (size_t i = 0; i < step.tensors.size(); ++i) {
    const StepTensor tensor = step.tensors[i];
    T* param = static_cast<T*>(call.outputs[per_tensor * i].data);
    T* state0 = per_tensor > 1 ? static_cast<T*>(call.outputs[per_tensor * i + 1].data) : nullptr;
    T* state1 = per_tensor > 2 ? static_cast<T*>(call.outputs[per_tensor * i + 2].data) : nullptr;
    const T* grad = static_cast<const T*>(call.inputs[i].data);
    const int64_t n = call.inputs[i].numel();
    if (hyper.rule == UpdateRule::SGD) {
      parallel_for(0, n, kGrainSize, [&](int64_t begin, int64_t end) {
        for (int64_t j = begin; j < end; ++j) {
          C p = convert<C>(param[j]);
          C buf = state0 ? convert<C>(state0[j]) : C(0);
          sgd_element<C>(hyper, tensor.first_step, p, convert<C>(grad[j]), &buf);
          param[j] = convert<T>(p);
          if (state0) state0[j] = convert<T>(buf);
        }
      });
    } else {
      parallel_for(0, n, kGrainSize, [&](int64_t begin, int64_t end) {
        for (int64_t j = begin; j < end; ++j) {
          C p = convert<C>(param[j]), m = convert<C>(state0[j]), v = convert<C>(state1[j]);
          adam_element<C>(hyper, tensor, p, convert<C>(grad[j]), m, v);
          param[j] = convert<T>(p);
          state0[j] = convert<T>(m);
          state1[j] = convert<T>(v);
        }
      });
    }
  }
}

}  // namespace

void run_optimizer_step(const KernelCall& call) {
  EMBER_ASSERT(call.payload != nullptr);
  const auto& step = *static_cast<const FusedStep*>(call.payload.get());
  EMBER_ASSERT(call.inputs.size() == step.tensors.size() &&
               call.outputs.size() == step.tensors.size() * static_cast<size_t>(1 + step.state_count()));
  if (step.tensors.empty()) return;
  switch (call.inputs[0].dtype) {
    case kFloat32: return step_group<float>(call, step);
    case kFloat64: return step_group<double>(call, step);
    case kFloat16: return step_group<Half>(call, step);
    case kBFloat16: return step_group<BFloat16>(call, step);
    default: fail<TypeError>("optimizer step: parameters of dtype ", dtype_name(call.inputs[0].dtype),
                             " are not supported");
  }
}

}  // namespace ember::detail::cpu
