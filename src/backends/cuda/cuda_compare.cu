// Comparisons (bool out) and isclose on the driver backend. Ordering comparisons are
// compiled for real types only; Eq/Ne and IsClose also for complex.
#include "backends/cuda/cuda_loops.cuh"

namespace ember::detail::driver {
namespace {

template <template <typename> class Allowed, template <typename> class Fn>
void run(const KernelCall& call, cudaStream_t stream, const char* name) {
  dispatch_if<Allowed>(call.inputs.at(0).dtype, name, [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch_map<bool, T, 2>(call, stream, Fn<compute_t<T>>{});
  });
}

void run_isclose(const KernelCall& call, cudaStream_t stream) {
  dispatch_if<AnyType>(call.inputs.at(0).dtype, "isclose", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using Fn = IsCloseFn<compute_t<T>>;
    using R = decltype(Fn::atol);
    const auto& a = call.arg<kargs::IsClose>();
    launch_map<bool, T, 2>(call, stream, Fn{a.atol.to<R>(), a.rtol.to<R>(), a.equal_nan});
  });
}

}  // namespace

void launch_compare(const KernelCall& call, cudaStream_t stream) {
  switch (call.op) {
    // EMBER_COMPARE_OPS (kernels/op_list.h): complex inputs only where the row takes them.
#define EMBER_CUDA_COMPARE(Kind, name, Functor, complex_ok)                      \
  case OpKind::Kind:                                                             \
    if constexpr (complex_ok) return run<AnyType, Functor>(call, stream, #name); \
    else return run<RealType_, Functor>(call, stream, #name);
    EMBER_COMPARE_OPS(EMBER_CUDA_COMPARE)
#undef EMBER_CUDA_COMPARE
    case OpKind::IsClose: return run_isclose(call, stream);
    default: EMBER_ASSERT(false);
  }
}

}  // namespace ember::detail::driver
