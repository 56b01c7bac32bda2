// The driver backend's CUDA kernels, run on the host execution layer (cuda_host.h), against
// the CPU backend: for each kernel family, one KernelCall runs through the driver's host
// launch code and kernels (ember::detail::cuda_host_driver) and through cpu::run, over
// random data in shapes that exercise the paths: empty, size 1, odd tails of the
// vectorised loop, non-contiguous, broadcast (stride 0), unaligned pointers (the strided
// fallback) and multi-block grids (grid-stride loops at the 64-block cap of the stand-in
// device). Integers and bools must match exactly, floats to a tolerance.
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <functional>
#include <string>
#include <vector>

#include "backends/cpu/cpu_kernels.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_fft_conv_kernels.h"
#include "backends/cuda/cuda_ops.h"
#include "cuda_host.h"
#include "ember/ember.h"
#include "kernels/dtype_dispatch.h"
#include "kernels/kernel_call.h"

namespace ember {
namespace {

namespace host = detail::cuda_host_driver;
using detail::KernelCall;
using detail::OpKind;
using detail::TensorArg;

TensorArg arg(const Tensor& t) { return TensorArg{t.data_ptr(), t.dtype(), t.sizes(), t.strides()}; }

void launch_on_host(const KernelCall& call) {
  switch (call.op) {
    case OpKind::Copy: return host::launch_copy(call, nullptr);
    case OpKind::Fill: return host::launch_fill(call, nullptr);
    case OpKind::Add: case OpKind::Sub: case OpKind::Mul: case OpKind::Div: case OpKind::Pow:
      return host::launch_binary(call, nullptr);
    case OpKind::AddScalar: case OpKind::MulScalar: case OpKind::PowScalar: case OpKind::RSubScalar:
    case OpKind::RDivScalar:
      return host::launch_scalar_op(call, nullptr);
    case OpKind::Eq: case OpKind::Ne: case OpKind::Lt: case OpKind::Le: case OpKind::Gt: case OpKind::Ge:
    case OpKind::IsClose:
      return host::launch_compare(call, nullptr);
    case OpKind::Neg: case OpKind::Abs: case OpKind::Exp: case OpKind::Log: case OpKind::Sqrt:
    case OpKind::Relu: case OpKind::Sigmoid: case OpKind::Tanh:
      return host::launch_unary(call, nullptr);
    case OpKind::Sum: case OpKind::Mean: case OpKind::Max: case OpKind::Min: case OpKind::All:
      return host::launch_reduce(call, nullptr);
    case OpKind::Matmul: return host::launch_integer_matmul(call, nullptr);
    case OpKind::IndexSelect: return host::launch_index_select(call, nullptr);
    case OpKind::Normal: case OpKind::Uniform: case OpKind::Arange: return host::launch_generate(call, nullptr);
    default: FAIL() << "no host launch for this op";
  }
}

/// Random values of `dtype` in a small range (so integer products do not overflow).
Tensor random(const IntList& sizes, DType dtype) {
  Tensor x = randn(sizes, kFloat64) * 6.0;
  if (dtype == kBool) return x.gt(0);
  if (dtype == kUInt8) return x.abs().to(dtype);
  if (is_complex(dtype)) return x.to(dtype) * Tensor(randn(sizes, kFloat64)).to(dtype);
  return x.to(dtype);
}

/// A view of `sizes` over fresh random storage in one of the layouts the kernels treat
/// differently.
enum class Layout { Contiguous, Transposed, Strided, Unaligned, Broadcast };
const char* layout_name(Layout l) {
  switch (l) {
    case Layout::Contiguous: return "contiguous";
    case Layout::Transposed: return "transposed";
    case Layout::Strided: return "strided";
    case Layout::Unaligned: return "unaligned";
    case Layout::Broadcast: return "broadcast";
  }
  return "";
}
Tensor view(const IntList& sizes, DType dtype, Layout layout) {
  switch (layout) {
    case Layout::Contiguous: return random(sizes, dtype);
    case Layout::Transposed: {
      if (sizes.size() < 2) return random(sizes, dtype);
      IntList t = sizes;
      std::swap(t[0], t[1]);
      return random(t, dtype).transpose(0, 1);
    }
    case Layout::Strided: {
      if (sizes.empty()) return random(sizes, dtype);
      IntList s = sizes;
      s.back() = s.back() * 2;
      return random(s, dtype).slice(static_cast<int64_t>(s.size()) - 1, 0, s.back(), 2);
    }
    case Layout::Unaligned: {  // one element past an aligned start: the strided fallback
      int64_t n = 1;
      for (int64_t s : sizes) n *= s;
      return random({n + 1}, dtype).narrow(0, 1, n).view(sizes);
    }
    case Layout::Broadcast: {
      if (sizes.empty()) return random(sizes, dtype);
      IntList s = sizes;
      s[0] = 1;
      return random(s, dtype).expand(sizes);
    }
  }
  return {};
}

const std::vector<IntList> kShapes = {{}, {0}, {1}, {7}, {4099}, {3, 5}, {33, 17}, {2, 0, 3}, {4, 1, 6}, {70000}};
const std::vector<Layout> kLayouts = {Layout::Contiguous, Layout::Transposed, Layout::Strided, Layout::Unaligned,
                                      Layout::Broadcast};

std::string describe(const KernelCall& call) {
  std::string s = std::string("op ") + std::to_string(static_cast<int>(call.op)) + " dtype " +
                  std::string(detail::scalar_type_name(call.inputs.empty() ? call.outputs[0].dtype : call.inputs[0].dtype)) +
                  " sizes [";
  const IntList& sizes = call.inputs.empty() ? call.outputs[0].sizes : call.inputs[0].sizes;
  for (int64_t v : sizes) s += std::to_string(v) + ",";
  return s + "]";
}

/// Runs `call` on the CPU into `expected`, on the host-run CUDA kernels into a copy of
/// the output filled with a poison value, and compares.
void compare(KernelCall call, const Tensor& expected, const std::string& what, double rtol = 1e-5,
             double atol = 1e-6) {
  Tensor actual = empty_like(expected);
  if (expected.numel() > 0) {
    if (expected.dtype() == kBool) actual.fill_(true);
    else if (is_integral(expected.dtype(), true)) actual.fill_(77);
    else actual.fill_(std::numeric_limits<double>::quiet_NaN());
  }
  call.outputs.at(0) = arg(expected);
  detail::cpu::run(call);
  call.outputs.at(0) = arg(actual);
  launch_on_host(call);
  detail::cuda_host_driver::check_cuda(cudaStreamSynchronize(nullptr));
  if (expected.numel() == 0) return;
  DType d = expected.dtype();
  if (d == kFloat16 || d == kBFloat16) {
    rtol = 1e-2;
    atol = 1e-2;
  }
  bool same = is_integral(d, true) ? actual.equal(expected)
                             : actual.to(is_complex(d) ? kComplex128 : kFloat64)
                                   .allclose(expected.to(is_complex(d) ? kComplex128 : kFloat64), rtol, atol, true);
  std::string first;
  if (!same && !is_integral(d, true)) {
    auto e = expected.to(kComplex128).contiguous().view({-1}).to_vector<std::complex<double>>();
    auto a = actual.to(kComplex128).contiguous().view({-1}).to_vector<std::complex<double>>();
    for (size_t i = 0; i < e.size() && first.empty(); ++i) {
      bool finite = std::isfinite(std::abs(e[i])) && std::isfinite(std::abs(a[i]));
      if (finite ? std::abs(e[i] - a[i]) > atol + rtol * std::abs(e[i]) : std::to_string(e[i].real()) + std::to_string(e[i].imag()) != std::to_string(a[i].real()) + std::to_string(a[i].imag()))
        first = "first mismatch at " + std::to_string(i) + ": expected (" + std::to_string(e[i].real()) + ", " +
                std::to_string(e[i].imag()) + "), actual (" + std::to_string(a[i].real()) + ", " +
                std::to_string(a[i].imag()) + ")";
    }
  }
  EXPECT_TRUE(same) << first << "\n" << what << ": " << describe(call) << "\nexpected " << expected << "\nactual " << actual;
}

const std::vector<DType> kAllTypes = {kBool,    kUInt8,   kInt8,      kInt16,     kInt32,     kInt64,
                                      kFloat16, kBFloat16, kFloat32, kFloat64, kComplex64, kComplex128};

bool supported(OpKind op, DType d) {
  bool numeric = d != kBool, real = !is_complex(d), floating = is_floating_point(d) || is_complex(d);
  switch (op) {
    case OpKind::Sub: case OpKind::Neg: case OpKind::Pow: case OpKind::Div: return numeric;
    case OpKind::Exp: case OpKind::Log: case OpKind::Sqrt: case OpKind::Sigmoid: case OpKind::Tanh: return floating;
    case OpKind::Relu: return real && numeric;
    case OpKind::Lt: case OpKind::Le: case OpKind::Gt: case OpKind::Ge: return real;
    case OpKind::Mean: return floating;
    case OpKind::Max: case OpKind::Min: return real;
    default: return true;
  }
}

TEST(CudaKernelsOnHost, ElementWiseMatchCpu) {
  manual_seed(1);
  const OpKind binary[] = {OpKind::Add, OpKind::Sub, OpKind::Mul, OpKind::Div, OpKind::Pow,
                           OpKind::Eq,  OpKind::Lt,  OpKind::Ge};
  const OpKind unary[] = {OpKind::Neg, OpKind::Abs, OpKind::Exp, OpKind::Log, OpKind::Sqrt,
                          OpKind::Relu, OpKind::Sigmoid, OpKind::Tanh};
  for (DType d : kAllTypes) {
    for (const IntList& sizes : kShapes) {
      for (Layout layout : kLayouts) {
        std::string what = std::string(layout_name(layout));
        Tensor a = view(sizes, d, layout), b = view(sizes, d, Layout::Contiguous);
        for (OpKind op : binary) {
          if (!supported(op, d)) continue;
          Tensor rhs = b;
          // The CPU raises ZeroDivisionError for integer division by zero (the driver gives 0).
          if (op == OpKind::Div && is_integral(d, true)) rhs = b.abs() + 1;
          if (op == OpKind::Pow && is_integral(d)) rhs = b.abs();
          // Small exponents: complex results near the float range's end round to inf differently.
          if (op == OpKind::Pow && is_complex(d)) rhs = b * 0.125;
          KernelCall call{op, {TensorArg{}}, {arg(a), arg(rhs)}};
          call.s0 = Scalar(op == OpKind::Add || op == OpKind::Sub ? 2 : 1);
          bool boolean = op == OpKind::Eq || op == OpKind::Lt || op == OpKind::Ge;
          // cuda::std::pow of complex is exp(b * log(a)), std::pow rounds differently.
          double rtol = op == OpKind::Pow && is_complex(d) ? 1e-3 : 1e-5;
          compare(call, empty(sizes, boolean ? kBool : d), what, rtol);
        }
        for (OpKind op : unary) {
          if (!supported(op, d)) continue;
          KernelCall call{op, {TensorArg{}}, {arg(a)}};
          DType out = op == OpKind::Abs && d == kComplex64    ? kFloat32
                      : op == OpKind::Abs && d == kComplex128 ? kFloat64
                                                              : d;
          compare(call, empty(sizes, out), what);
        }
        for (DType to : {kInt64, kFloat32, kBool, kComplex64}) {  // Copy converts
          KernelCall call{OpKind::Copy, {TensorArg{}}, {arg(a)}};
          compare(call, empty(sizes, to), what + " copy");
        }
        KernelCall scalar{OpKind::MulScalar, {TensorArg{}}, {arg(a)}};
        scalar.s0 = Scalar(3);
        compare(scalar, empty(sizes, d), what + " mul scalar");
      }
    }
  }
}

}  // namespace
}  // namespace ember
