// cpu::run_foreach_mul: every output scaled in place by one element (OpKind::ForeachMul),
// each tensor's elements split over the pool; mixed precision's gradient check and unscale
// (AmpNonFiniteCheckAndUnscale) and its scale update (AmpUpdateScale).
#include <atomic>
#include <cmath>

#include "backends/cpu/cpu_kernels.h"
#include "ember/errors.h"
#include "kernels/amp_kernels.h"
#include "kernels/convert.h"
#include "kernels/parallel.h"

namespace ember::detail::cpu {
namespace {

template <typename T>
void scale_all(const KernelCall& call) {
  using C = compute_t<T>;
  const C scale = convert<C>(*static_cast<const T*>(call.inputs[0].data));
  for (const TensorArg& out : call.outputs) {
    T* data = static_cast<T*>(out.data);
    parallel_for(0, out.numel(), kGrainSize, [&](int64_t begin, int64_t end) {
      for (int64_t j = begin; j < end; ++j) data[j] = convert<T>(convert<C>(data[j]) * scale);
    });
  }
}

template <typename T>
void check_and_unscale(const KernelCall& call, float inv_scale, std::atomic<bool>& found) {
  using C = std::conditional_t<std::is_same_v<T, double>, double, float>;  // PyTorch's opmath type
  for (size_t k = 1; k < call.outputs.size(); ++k) {
    const TensorArg& grad = call.outputs[k];
    T* data = static_cast<T*>(grad.data);
    parallel_for(0, grad.numel(), kGrainSize, [&](int64_t begin, int64_t end) {
      bool local = false;
      for (int64_t j = begin; j < end; ++j) {
        const C value = convert<C>(data[j]);
        local |= !std::isfinite(value);
        data[j] = convert<T>(inv_scale == 1.0f ? value : value * C(inv_scale));
      }
      if (local) found.store(true, std::memory_order_relaxed);
    });
  }
}

}  // namespace

void run_amp_check_and_unscale(const KernelCall& call) {
  EMBER_ASSERT(call.inputs.size() == 1 && call.inputs[0].dtype == kFloat32 && !call.outputs.empty() &&
               call.outputs[0].dtype == kFloat32);
  const float inv_scale = *static_cast<const float*>(call.inputs[0].data);
  std::atomic<bool> found{false};
  if (call.outputs.size() > 1) {
    switch (call.outputs[1].dtype) {
      case kFloat32: check_and_unscale<float>(call, inv_scale, found); break;
      case kFloat64: check_and_unscale<double>(call, inv_scale, found); break;
      case kFloat16: check_and_unscale<Half>(call, inv_scale, found); break;
      case kBFloat16: check_and_unscale<BFloat16>(call, inv_scale, found); break;
      default:
        fail<TypeError>("_amp_foreach_non_finite_check_and_unscale_: gradients of dtype ",
                        dtype_name(call.outputs[1].dtype), " are not supported");
    }
  }
  if (found.load(std::memory_order_relaxed)) *static_cast<float*>(call.outputs[0].data) = 1.0f;
}

void run_amp_update_scale(const KernelCall& call) {
  EMBER_ASSERT(call.outputs.size() == 2 && call.inputs.size() == 1);
  float& scale = *static_cast<float*>(call.outputs[0].data);
  int32_t& tracker = *static_cast<int32_t*>(call.outputs[1].data);
  const float found_inf = *static_cast<const float*>(call.inputs[0].data);
  const auto& args = call.arg<kargs::AmpUpdateScale>();
  amp_update_scale(scale, tracker, found_inf, static_cast<float>(args.growth_factor),
                   static_cast<float>(args.backoff_factor), static_cast<int32_t>(args.growth_interval));
}

void run_foreach_mul(const KernelCall& call) {
  EMBER_ASSERT(call.inputs.size() == 1 && call.inputs[0].numel() == 1);
  switch (call.inputs[0].dtype) {
    case kFloat32: return scale_all<float>(call);
    case kFloat64: return scale_all<double>(call);
    case kFloat16: return scale_all<Half>(call);
    case kBFloat16: return scale_all<BFloat16>(call);
    default: fail<TypeError>("foreach_mul_: tensors of dtype ", dtype_name(call.inputs[0].dtype), " are not supported");
  }
}

}  // namespace ember::detail::cpu
