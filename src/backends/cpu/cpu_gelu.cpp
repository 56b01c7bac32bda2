// Gelu and GeluBackward (contracts in kernels/transformer_kernels.h): element-wise maps of
// the shared functors.
#include "backends/cpu/cpu_loops.h"
#include "backends/cpu/cpu_ops.h"
#include "kernels/transformer_kernels.h"

namespace ember::detail::cpu {

void run_gelu(const KernelCall& call) {
  const TensorArg& out = call.outputs.at(0);
  dispatch(out.dtype, [&]<typename T>(TypeTag<T>) {
    if constexpr (!is_floating_v<T>) {
      not_implemented(call.op == OpKind::Gelu ? "GeluKernelImpl" : "GeluBackwardKernelImpl", out.dtype);
    } else {
      using C = compute_t<T>;
      if (call.op == OpKind::Gelu) map_unary<T, T>(out, call.inputs.at(0), GeluFn<C>{call.flag});
      else map_binary<T, T>(out, call.inputs.at(0), call.inputs.at(1), GeluBackwardFn<C>{call.flag});
    }
  });
}

}  // namespace ember::detail::cpu
