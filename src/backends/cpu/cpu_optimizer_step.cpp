// cpu::run_optimizer_step: the fused optimizer update on the host (Note [Fused optimizer
// step] in kernels/optimizer_step.h). Each tensor's elements are split over the pool.
#include <type_traits>

#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/cpu_vector.h"
#include "ember/errors.h"
#include "kernels/convert.h"
#include "kernels/optimizer_step.h"
#include "kernels/parallel.h"

namespace ember::detail::cpu {
namespace {

// float parameters, the hot case: straight loops over restrict pointers that the compiler
// vectorises (the element rules are the same inline functions; the flags they branch on
// are loop-invariant, so the loops are unswitched). Compiled for AVX2 and the baseline.
EMBER_VECTOR_CLONES void adam_run(StepHyper h, StepTensor t, float* __restrict param, float* __restrict exp_avg,
                                  float* __restrict exp_avg_sq, const float* __restrict grad, int64_t n) {
  for (int64_t j = 0; j < n; ++j) {
    float p = param[j], m = exp_avg[j], v = exp_avg_sq[j];
    adam_element<float>(h, t, p, grad[j], m, v);
    param[j] = p;
    exp_avg[j] = m;
    exp_avg_sq[j] = v;
  }
}

EMBER_VECTOR_CLONES void sgd_run(StepHyper h, bool first_step, float* __restrict param, float* __restrict buffer,
                                 const float* __restrict grad, int64_t n) {
  if (buffer == nullptr) {
    for (int64_t j = 0; j < n; ++j) {
      float p = param[j];
      sgd_element<float>(h, first_step, p, grad[j], nullptr);
      param[j] = p;
    }
    return;
  }
  for (int64_t j = 0; j < n; ++j) {
    float p = param[j], buf = buffer[j];
    sgd_element<float>(h, first_step, p, grad[j], &buf);
    param[j] = p;
    buffer[j] = buf;
  }
}

template <typename T>
void step_group(const KernelCall& call, const FusedStep& step) {
  using C = compute_t<T>;
  const int per_tensor = 1 + step.state_count();
  const StepHyper hyper = step.hyper;
  for (size_t i = 0; i < step.tensors.size(); ++i) {
    const StepTensor tensor = resolve_step(hyper, step.tensors[i]);
    T* param = static_cast<T*>(call.outputs[per_tensor * i].data);
    T* state0 = per_tensor > 1 ? static_cast<T*>(call.outputs[per_tensor * i + 1].data) : nullptr;
    T* state1 = per_tensor > 2 ? static_cast<T*>(call.outputs[per_tensor * i + 2].data) : nullptr;
    const T* grad = static_cast<const T*>(call.inputs[i].data);
    const int64_t n = call.inputs[i].numel();
    if constexpr (std::is_same_v<T, float>) {
      if (hyper.rule == UpdateRule::SGD) {
        parallel_for(0, n, kGrainSize, [&](int64_t begin, int64_t end) {
          sgd_run(hyper, tensor.first_step, param + begin, state0 ? state0 + begin : nullptr, grad + begin,
                  end - begin);
        });
      } else {
        parallel_for(0, n, kGrainSize, [&](int64_t begin, int64_t end) {
          adam_run(hyper, tensor, param + begin, state0 + begin, state1 + begin, grad + begin, end - begin);
        });
      }
    } else if (hyper.rule == UpdateRule::SGD) {
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
  const auto& step = call.payload.get<FusedStep>(call.op);
  EMBER_ASSERT(call.inputs.size() == step.tensors.size() + (step.skip_if_found_inf ? 1 : 0) &&
               call.outputs.size() == step.tensors.size() * static_cast<size_t>(1 + step.state_count()));
  if (step.tensors.empty()) return;
  if (step.skip_if_found_inf && *static_cast<const float*>(call.inputs.back().data) != 0.0f) return;
  switch (call.inputs[0].dtype) {
    case kFloat32: return step_group<float>(call, step);
    case kFloat64: return step_group<double>(call, step);
    case kFloat16: return step_group<Half>(call, step);
    case kBFloat16: return step_group<BFloat16>(call, step);
    default:
      fail<TypeError>("optimizer step: parameters of dtype ", dtype_name(call.inputs[0].dtype), " are not supported");
  }
}

}  // namespace ember::detail::cpu
