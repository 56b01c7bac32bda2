// Gelu and GeluBackward on the driver backend: element-wise maps of the functors that the
// cpu runs too (kernels/transformer_kernels.h).
#include "backends/cuda/cuda_loops.cuh"
#include "kernels/transformer_kernels.h"

namespace ember::detail::driver {

void launch_gelu(const KernelCall& call, cudaStream_t stream) {
  const bool forward = call.op == OpKind::Gelu;
  const bool use_tanh = call.arg<kargs::Gelu>().tanh;
  dispatch_if<FloatType>(call.outputs.at(0).dtype, forward ? "GeluCUDAKernelImpl" : "GeluBackwardCUDAKernelImpl",
                         [&](auto tag) {
                           using T = typename decltype(tag)::type;
                           using C = compute_t<T>;
                           if (forward) launch_map<T, T, 1>(call, stream, GeluFn<C>{use_tanh});
                           else launch_map<T, T, 2>(call, stream, GeluBackwardFn<C>{use_tanh});
                         });
}

}  // namespace ember::detail::driver
