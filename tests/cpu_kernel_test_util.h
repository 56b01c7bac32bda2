// Helpers for tests that drive cpu::run directly over std::vector buffers.
#pragma once

#include <complex>
#include <cstdint>
#include <vector>

#include "backends/cpu/cpu_kernels.h"
#include "kernels/kernel_call.h"
#include "kernels/op_name.h"

namespace ember::test {

using detail::KernelCall;
using detail::OpKind;
using detail::TensorArg;

/// Row-major strides of `sizes`.
inline IntList contiguous_strides(const IntList& sizes) {
  IntList strides(sizes.size());
  int64_t s = 1;
  for (size_t d = sizes.size(); d-- > 0;) {
    strides[d] = s;
    s *= sizes[d];
  }
  return strides;
}

/// A TensorArg viewing `data` (no copy); contiguous unless strides are given.
template <typename T>
TensorArg arg(std::vector<T>& data, IntList sizes, IntList strides = {}, int64_t offset = 0) {
  if (strides.empty()) strides = contiguous_strides(sizes);
  return TensorArg{data.data() + offset, dtype_of<T>(), std::move(sizes), std::move(strides)};
}
/// std::vector<bool> has no data(): tests use uint8_t storage viewed as bool.
inline TensorArg bool_arg(std::vector<uint8_t>& data, IntList sizes, IntList strides = {}) {
  TensorArg a = arg(data, std::move(sizes), std::move(strides));
  a.dtype = kBool;
  return a;
}

/// The arguments of `op`'s row (kernels/op_args.h) from up to two scalars, for the ops whose
/// struct holds only scalars: alpha, the tensor-scalar value, isclose's atol and rtol, the
/// random ops' pair; the others carry their row's struct, default-constructed.
inline detail::OpArgs scalar_args(OpKind op, Scalar s0 = 0, Scalar s1 = 0) {
  namespace kargs = detail::kargs;
  switch (op) {
    case OpKind::Add: case OpKind::Sub: return kargs::Alpha{s0};
    case OpKind::Fill: case OpKind::AddScalar: case OpKind::MulScalar: case OpKind::PowScalar:
    case OpKind::RSubScalar: case OpKind::RDivScalar:
      return kargs::Value{s0};
    case OpKind::IsClose: return kargs::IsClose{s0, s1, false};
    case OpKind::Normal: return kargs::Normal{s0, s1};
    case OpKind::Uniform: return kargs::Uniform{s0, s1};
    case OpKind::Arange: return kargs::Arange{s0, s1};
    default: return detail::default_args(op);
  }
}

inline KernelCall call(OpKind op, std::vector<TensorArg> outputs, std::vector<TensorArg> inputs, Scalar s0 = 0,
                       Scalar s1 = 0) {
  KernelCall c;
  c.op = op;
  c.outputs = std::move(outputs);
  c.inputs = std::move(inputs);
  c.args = scalar_args(op, s0, s1);
  return c;
}

inline void run(const KernelCall& c) { detail::cpu::run(c); }

}  // namespace ember::test
