// Unary and tensor-scalar element-wise ops.
//
// Float sigmoid and tanh use the vectorisable bodies of cpu_vec_activations.h (within 3 ulp
// of std::'s, as the fused recurrent cells do); without trapping math the compiler may
// evaluate both sides of their selects, which lets the loops vectorise (as in
// cpu_softmax.cpp).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif
#include <type_traits>

#include "backends/cpu/cpu_loops.h"
#include "backends/cpu/cpu_ops.h"
#include "backends/cpu/cpu_vec_activations.h"
#include "kernels/functors.h"
#include "kernels/op_name.h"

namespace ember::detail::cpu {
namespace {

template <typename T>
void run_typed(const KernelCall& call, const TensorArg& out, const TensorArg& in) {
  using C = compute_t<T>;
  const char* name = op_name(call.op);
  constexpr bool is_bool = std::is_same_v<T, bool>;
  constexpr bool is_real_floating = is_floating_v<T>;
  constexpr bool is_inexact = is_real_floating || is_complex_v<T>;
  auto apply = [&](auto fn) {
    expect_dtype(name, out, in.dtype);
    map_unary<T, T>(out, in, fn);
  };
  auto value = [&] { return call.arg<kargs::Value>().value; };
  // The tensor-scalar ops' own rules, then their shared body (EMBER_SCALAR_OPS, op_list.h).
  if constexpr (std::is_integral_v<T> && !is_bool) {
    if (call.op == OpKind::PowScalar) {
      EMBER_CHECK(value().template to<int64_t>() >= 0, ValueError,
                  "Integers to negative integer powers are not allowed.");
    }
    if (call.op == OpKind::RDivScalar) check_no_zero_divisor(in);
  }
  EMBER_CHECK(!is_bool || call.op != OpKind::RSubScalar, TypeError,
              "Subtraction, the `-` operator, with a bool tensor is not supported. "
              "If you are trying to invert a mask, use the `~` or `logical_not()` operator instead.");
  switch (call.op) {
#define EMBER_CPU_SCALAR_OP(Kind, public_name, Functor, bool_ok)          \
  case OpKind::Kind:                                                      \
    if constexpr (is_bool && !(bool_ok)) not_implemented(name, in.dtype); \
    else return apply(Functor<C>{value().template to<C>()});              \
    break;
    EMBER_SCALAR_OPS(EMBER_CPU_SCALAR_OP)
#undef EMBER_CPU_SCALAR_OP
    case OpKind::Neg:
      EMBER_CHECK(!is_bool, TypeError,
                  "Negation, the `-` operator, on a bool tensor is not supported. "
                  "If you are trying to invert a mask, use the `~` or `logical_not()` operator instead.");
      return apply(NegFn<C>{});
    case OpKind::Abs:
      if constexpr (is_complex_v<T>) {
        // abs of a complex tensor is real (complex64 -> float32).
        expect_dtype(name, out, in.dtype == kComplex64 ? kFloat32 : kFloat64);
        return map_unary<real_t<T>, T>(out, in, AbsFn<C>{});
      } else {
        return apply(AbsFn<C>{});
      }
    case OpKind::Relu:
      if constexpr (is_bool || is_complex_v<T>) not_implemented(name, in.dtype);
      else return apply(ReluFn<C>{});
        // Integral inputs are promoted to floating by the op layer (Note [Declaring an op]).
#define EMBER_CPU_FLOAT_UNARY(Kind, public_name, Functor, ...)                                                  \
  case OpKind::Kind:                                                                                            \
    if constexpr (!is_inexact || (is_complex_v<T> && kRealOnlyUnary<Functor>)) not_implemented(name, in.dtype); \
    else return apply(Functor<C>{});                                                                            \
    break;
      EMBER_FLOAT_UNARY_OPS(EMBER_CPU_FLOAT_UNARY)
#undef EMBER_CPU_FLOAT_UNARY
    default: fail<ValueError>("cpu::run_unary: not a unary op: ", static_cast<int>(call.op));
  }
}

struct VecSigmoidFn {
  float operator()(float x) const { return vec_sigmoid(x); }
};
struct VecTanhFn {
  float operator()(float x) const { return vec_tanh(x); }
};

}  // namespace

void run_unary(const KernelCall& call) {
  EMBER_CHECK(call.outputs.size() == 1 && call.inputs.size() == 1, ValueError, op_name(call.op),
              ": expected 1 output and 1 input, got ", call.outputs.size(), " and ", call.inputs.size());
  const TensorArg &out = call.outputs[0], &in = call.inputs[0];
  if (in.dtype == kFloat32 && (call.op == OpKind::Sigmoid || call.op == OpKind::Tanh)) {
    expect_dtype(op_name(call.op), out, in.dtype);
    if (call.op == OpKind::Sigmoid) return map_unary<float, float>(out, in, VecSigmoidFn{});
    return map_unary<float, float>(out, in, VecTanhFn{});
  }
  dispatch(in.dtype, [&]<typename T>(TypeTag<T>) { run_typed<T>(call, out, in); });
}

}  // namespace ember::detail::cpu
