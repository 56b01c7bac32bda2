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
    launch_map<bool, T, 2>(call, stream, Fn{call.s0.to<R>(), call.s1.to<R>(), call.flag});
  });
}

}  // namespace

void launch_compare(const KernelCall& call, cudaStream_t stream) {
  switch (call.op) {
    case OpKind::Eq: return run<AnyType, EqFn>(call, stream, "eq");
    case OpKind::Ne: return run<AnyType, NeFn>(call, stream, "ne");
    case OpKind::Lt: return run<RealType_, LtFn>(call, stream, "lt");
    case OpKind::Le: return run<RealType_, LeFn>(call, stream, "le");
    case OpKind::Gt: return run<RealType_, GtFn>(call, stream, "gt");
    case OpKind::Ge: return run<RealType_, GeFn>(call, stream, "ge");
    case OpKind::IsClose: return run_isclose(call, stream);
    default: EMBER_ASSERT(false);
  }
}

}  // namespace ember::detail::driver
