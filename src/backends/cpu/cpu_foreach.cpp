// cpu::run_foreach_mul: every output scaled in place by one element (OpKind::ForeachMul),
// each tensor's elements split over the pool.
#include "backends/cpu/cpu_kernels.h"
#include "ember/errors.h"
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

}  // namespace

void run_foreach_mul(const KernelCall& call) {
  EMBER_ASSERT(call.inputs.size() == 1 && call.inputs[0].numel() == 1);
  switch (call.inputs[0].dtype) {
    case kFloat32: return scale_all<float>(call);
    case kFloat64: return scale_all<double>(call);
    case kFloat16: return scale_all<Half>(call);
    case kBFloat16: return scale_all<BFloat16>(call);
    default: fail<TypeError>("foreach_mul_: tensors of dtype ", dtype_name(call.inputs[0].dtype),
                             " are not supported");
  }
}

}  // namespace ember::detail::cpu
