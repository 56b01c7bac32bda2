// Kernel tests' arguments: the struct of an op's row (kernels/op_args.h) from the scalars a
// test names.
#pragma once

#include "ember/scalar.h"
#include "kernels/kernel_call.h"
#include "kernels/op_name.h"

namespace ember::test {

/// The arguments of `op`'s row from up to two scalars, for the ops whose struct holds only
/// scalars: alpha, the tensor-scalar value, isclose's atol and rtol (equal_nan off), the random
/// ops' pair; the others carry their row's struct, default-constructed.
inline detail::OpArgs scalar_args(detail::OpKind op, Scalar s0 = 0, Scalar s1 = 0) {
  namespace kargs = detail::kargs;
  using detail::OpKind;
  switch (op) {
    case OpKind::Add:
    case OpKind::Sub: return kargs::Alpha{s0};
    case OpKind::Fill:
    case OpKind::AddScalar:
    case OpKind::MulScalar:
    case OpKind::PowScalar:
    case OpKind::RSubScalar:
    case OpKind::RDivScalar: return kargs::Value{s0};
    case OpKind::IsClose: return kargs::IsClose{s0, s1, false};
    case OpKind::Normal: return kargs::Normal{s0, s1};
    case OpKind::Uniform: return kargs::Uniform{s0, s1};
    case OpKind::Arange: return kargs::Arange{s0, s1};
    default: return detail::default_args(op);
  }
}

}  // namespace ember::test
