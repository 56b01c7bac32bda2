// Where, Clamp and ClampScalar: three-operand selection over broadcast operands.
#include <type_traits>

#include "backends/cpu/cpu_loops.h"
#include "backends/cpu/cpu_ops.h"
#include "kernels/op_name.h"
#include "kernels/select_functors.h"

namespace ember::detail::cpu {
namespace {

// out = f(in0, in1, in2); in0 of storage type A, in1 and in2 of T, out of T.
template <typename T, typename A, typename F>
void map_ternary(const KernelCall& call, F f) {
  using C = compute_t<T>;
  const TensorArg& out = call.outputs[0];
  LoopShape s = make_loop_shape({&out, &call.inputs[0], &call.inputs[1], &call.inputs[2]}, /*reorder=*/true);
  char* base[] = {static_cast<char*>(out.data), static_cast<char*>(call.inputs[0].data),
                  static_cast<char*>(call.inputs[1].data), static_cast<char*>(call.inputs[2].data)};
  parallel_loop(s, base, [f](char* const* p, const int64_t* st, int64_t n) {
    constexpr int64_t kT = sizeof(T), kA = sizeof(A);
    // Dense rows, where b and c may each be one broadcast value (masked_fill, relu's
    // backward, where with a scalar): straight loops the compiler vectorises.
    // A bool condition is read as bytes: the vectoriser has no vector type for bool.
    auto dense = [&]<bool kBOne, bool kCOne>() {
      using Storage = std::conditional_t<std::is_same_v<A, bool>, unsigned char, A>;
      T* o = reinterpret_cast<T*>(p[0]);
      const Storage* a = reinterpret_cast<const Storage*>(p[1]);
      const T* b = reinterpret_cast<const T*>(p[2]);
      const T* c = reinterpret_cast<const T*>(p[3]);
#pragma GCC ivdep
      for (int64_t i = 0; i < n; ++i) {
        const auto cond = [&] {
          if constexpr (std::is_same_v<A, bool>) return a[i] != 0;
          else return convert<compute_t<A>>(a[i]);
        }();
        o[i] = convert<T>(f(cond, convert<C>(b[kBOne ? 0 : i]), convert<C>(c[kCOne ? 0 : i])));
      }
    };
    if (st[0] == kT && st[1] == kA && (st[2] == kT || st[2] == 0) && (st[3] == kT || st[3] == 0)) {
      if (st[2] == kT && st[3] == kT) return dense.template operator()<false, false>();
      if (st[2] == 0 && st[3] == kT) return dense.template operator()<true, false>();
      if (st[2] == kT && st[3] == 0) return dense.template operator()<false, true>();
      return dense.template operator()<true, true>();
    }
    for (int64_t i = 0; i < n; ++i) {
      const A a = *reinterpret_cast<const A*>(p[1] + i * st[1]);
      const T b = *reinterpret_cast<const T*>(p[2] + i * st[2]);
      const T c = *reinterpret_cast<const T*>(p[3] + i * st[3]);
      *reinterpret_cast<T*>(p[0] + i * st[0]) = convert<T>(f(convert<compute_t<A>>(a), convert<C>(b), convert<C>(c)));
    }
  });
}

}  // namespace

void run_select(const KernelCall& call) {
  EMBER_CHECK(call.outputs.size() == 1, ValueError, op_name(call.op), ": expected 1 output");
  const TensorArg& out = call.outputs[0];
  dispatch(out.dtype, [&]<typename T>(TypeTag<T>) {
    using C = compute_t<T>;
    switch (call.op) {
      case OpKind::Where:
        expect_dtype("where", call.inputs.at(0), kBool);
        return map_ternary<T, bool>(call, WhereFn<C>{});
      case OpKind::Clamp:
        if constexpr (is_complex_v<T>) not_implemented("clamp", out.dtype);
        else
          return map_ternary<T, T>(call,
                                   ClampFn<C>{call.arg<kargs::Clamp>().has_min, call.arg<kargs::Clamp>().has_max});
      case OpKind::ClampScalar:
        if constexpr (is_complex_v<T>) {
          not_implemented("clamp", out.dtype);
        } else {
          const auto& a = call.arg<kargs::ClampScalar>();
          return map_unary<T, T>(out, call.inputs.at(0),
                                 ClampScalarFn<C>{a.min.to<C>(), a.max.to<C>(), a.has_min, a.has_max});
        }
      default: fail<ValueError>("cpu::run_select: not a selection op: ", op_name(call.op));
    }
  });
}

}  // namespace ember::detail::cpu
