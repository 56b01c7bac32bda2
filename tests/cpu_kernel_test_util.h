// Helpers for tests that drive cpu::run directly over std::vector buffers.
#pragma once

#include <complex>
#include <cstdint>
#include <vector>

#include "backends/cpu/cpu_kernels.h"
#include "kernel_args_util.h"
#include "kernels/kernel_call.h"

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
