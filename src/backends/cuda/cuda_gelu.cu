// Gelu and GeluBackward on the driver backend: element-wise maps of the functors that the
// cpu runs too (kernels/transformer_kernels.h).
#include "backends/cuda/cuda_loops.cuh"
#include "kernels/transformer_kernels.h"

namespace ember::detail::driver {

void launch_gelu(const KernelCall& call, cudaStream_t stream) {
  const bool forward = call.op == OpKind::Gelu;
  dispatch_if<FloatType>(call.outputs.at(0).dtype, forward ? "GeluCUDAKernelImpl" : "GeluBackwardCUDAKernelImpl",
                         [&](auto tag) {
                           using T = typename decltype(tag)::type;
                           using C = compute_t<T>;
                           if (forward) launch_map<T, T, 1>(call, stream, GeluFn<C>{call.flag});
                           else launch_map<T, T, 2>(call, stream, GeluBackwardFn<C>{call.flag});
                         });
}

}  // namespace ember::detail::driver
