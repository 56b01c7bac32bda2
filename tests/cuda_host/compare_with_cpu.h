// Helpers of the host-run kernel tests: operands in the layouts the kernels treat
// differently, and the comparison of a KernelCall run by the driver's host-compiled launch
// code and kernels (ember::detail::cuda_host_driver) with the same call run by cpu::run.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "backends/cpu/cpu_kernels.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_fft_conv_kernels.h"
#include "backends/cuda/cuda_ops.h"
#include "cuda_host.h"
#include "ember/ember.h"
#include "kernel_args_util.h"
#include "kernels/conv_geometry.h"
#include "kernels/dtype_dispatch.h"
#include "kernels/kernel_call.h"
#include "kernels/op_name.h"

namespace ember::host_test {

namespace host = detail::cuda_host_driver;

/// Under AddressSanitizer the tests skip their largest cases (fibers and checks cost more).
#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif

/// Under AddressSanitizer, cases of more than 2000 elements run in `keep` only.
inline bool skipped_under_sanitizer(const IntList& sizes, DType d, DType keep = kFloat32) {
  int64_t n = 1;
  for (int64_t v : sizes) n *= v;
  return kSanitized && n > 2000 && d != keep;
}
using detail::KernelCall;
using detail::OpKind;
using detail::TensorArg;

namespace kargs = detail::kargs;

using test::scalar_args;

inline TensorArg arg(const Tensor& t) { return TensorArg{t.data_ptr(), t.dtype(), t.sizes(), t.strides()}; }

/// Runs `call` through the driver's host-compiled launcher of its row of the op list
/// (kCudaLaunchers, backends/cuda/cuda_ops.h; host_launchers.cpp for those outside .cu files).
inline void launch_on_host(const KernelCall& call) {
  host::kCudaLaunchers[static_cast<size_t>(call.op)](call, nullptr);
}

/// Random values of `dtype` in a small range (so integer products do not overflow).
inline Tensor random(const IntList& sizes, DType dtype) {
  Tensor x = randn(sizes, kFloat64) * 6.0;
  if (dtype == kBool) return x.gt(0);
  if (dtype == kUInt8) return x.abs().to(dtype);
  if (is_complex(dtype)) return x.to(dtype) * Tensor(randn(sizes, kFloat64)).to(dtype);
  return x.to(dtype);
}

/// A view of `sizes` over fresh random storage in one of the layouts the kernels treat
/// differently.
enum class Layout { Contiguous, Transposed, Strided, Unaligned, Broadcast };
inline const char* layout_name(Layout l) {
  switch (l) {
    case Layout::Contiguous: return "contiguous";
    case Layout::Transposed: return "transposed";
    case Layout::Strided: return "strided";
    case Layout::Unaligned: return "unaligned";
    case Layout::Broadcast: return "broadcast";
  }
  return "";
}
inline Tensor view(const IntList& sizes, DType dtype, Layout layout) {
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

inline const std::vector<IntList> kShapes = {{},     {0},      {1},       {7},       {4099},
                                             {3, 5}, {33, 17}, {2, 0, 3}, {4, 1, 6}, {70000}};
inline const std::vector<Layout> kLayouts = {Layout::Contiguous, Layout::Transposed, Layout::Strided, Layout::Unaligned,
                                             Layout::Broadcast};

/// `count` shapes of 1 to 3 dims, each of size 0 to 40, 20 or 10 (by dims), the same on
/// every run (`seed`).
inline std::vector<IntList> random_shapes(int count, unsigned seed) {
  std::mt19937 generator(seed);
  std::vector<IntList> shapes;
  for (int i = 0; i < count; ++i) {
    IntList shape(1 + generator() % 3);
    for (int64_t& size : shape) size = static_cast<int64_t>(generator() % (1 + 40 / shape.size()));
    shapes.push_back(shape);
  }
  return shapes;
}

inline std::string describe(const KernelCall& call) {
  std::string s =
      std::string("op ") + std::to_string(static_cast<int>(call.op)) + " dtype " +
      std::string(detail::scalar_type_name(call.inputs.empty() ? call.outputs[0].dtype : call.inputs[0].dtype)) +
      " sizes [";
  const IntList& sizes = call.inputs.empty() ? call.outputs[0].sizes : call.inputs[0].sizes;
  for (int64_t v : sizes) s += std::to_string(v) + ",";
  return s + "]";
}

/// Fills `t` with a value no kernel writes by accident (NaN, 77, true).
inline void poison(Tensor t) {
  if (t.numel() == 0) return;
  if (t.dtype() == kBool) t.fill_(true);
  else if (is_integral(t.dtype(), true)) t.fill_(77);
  else t.fill_(std::numeric_limits<double>::quiet_NaN());
}

/// Expects `actual` to equal `expected`: exactly for integers and bools, to rtol/atol
/// (1e-2 for float16/bfloat16) for floats, NaN equal to NaN.
inline void expect_same(const Tensor& actual, const Tensor& expected, const std::string& what, double rtol = 1e-5,
                        double atol = 1e-6) {
  if (expected.numel() == 0) return;
  DType d = expected.dtype();
  if (d == kFloat16 || d == kBFloat16) {
    rtol = std::max(rtol, 1e-2);
    atol = std::max(atol, 1e-2);
  }
  bool same = is_integral(d, true)
                  ? actual.equal(expected)
                  : actual.to(is_complex(d) ? kComplex128 : kFloat64)
                        .allclose(expected.to(is_complex(d) ? kComplex128 : kFloat64), rtol, atol, true);
  std::string first;
  if (!same && !is_integral(d, true)) {
    auto e = expected.to(kComplex128).contiguous().view({-1}).to_vector<std::complex<double>>();
    auto a = actual.to(kComplex128).contiguous().view({-1}).to_vector<std::complex<double>>();
    for (size_t i = 0; i < e.size() && first.empty(); ++i) {
      bool finite = std::isfinite(std::abs(e[i])) && std::isfinite(std::abs(a[i]));
      if (finite ? std::abs(e[i] - a[i]) > atol + rtol * std::abs(e[i])
                 : std::to_string(e[i].real()) + std::to_string(e[i].imag()) !=
                       std::to_string(a[i].real()) + std::to_string(a[i].imag()))
        first = "first mismatch at " + std::to_string(i) + ": expected (" + std::to_string(e[i].real()) + ", " +
                std::to_string(e[i].imag()) + "), actual (" + std::to_string(a[i].real()) + ", " +
                std::to_string(a[i].imag()) + ")";
    }
  }
  EXPECT_TRUE(same) << first << "\n" << what << "\nexpected " << expected << "\nactual " << actual;
}

/// Runs `call` on the CPU into `expected` (one tensor per output), on the host-run CUDA
/// kernels into poisoned tensors like them, and compares each output.
inline void compare_outputs(KernelCall call, const std::vector<Tensor>& expected, const std::string& what,
                            double rtol = 1e-5, double atol = 1e-6) {
  std::vector<Tensor> actual;
  call.outputs.resize(expected.size());
  for (size_t k = 0; k < expected.size(); ++k) {
    actual.push_back(empty_like(expected[k]));
    poison(actual[k]);
    call.outputs[k] = arg(expected[k]);
  }
  detail::cpu::run(call);
  for (size_t k = 0; k < expected.size(); ++k) call.outputs[k] = arg(actual[k]);
  launch_on_host(call);
  detail::cuda_host_driver::check_cuda(cudaStreamSynchronize(nullptr));
  for (size_t k = 0; k < expected.size(); ++k) {
    expect_same(actual[k], expected[k], what + ": " + describe(call) + " output " + std::to_string(k), rtol, atol);
  }
}

inline void compare(const KernelCall& call, const Tensor& expected, const std::string& what, double rtol = 1e-5,
                    double atol = 1e-6) {
  compare_outputs(call, {expected}, what, rtol, atol);
}

/// What synchronising after a failed device assert raises (PyTorch's wording).
inline constexpr const char* kDeviceAssertMessage =
    "CUDA error: device-side assert triggered\nCUDA kernel errors might be asynchronously reported at some other "
    "API call, so the stacktrace below might be incorrect.\nFor debugging consider passing CUDA_LAUNCH_BLOCKING=1";

/// Synchronises the stand-in stream: the CudaError's message ("" if none); then clears the
/// sticky error, as a device reset does.
inline std::string synchronize_and_reset() {
  std::string message;
  try {
    host::check_cuda(cudaStreamSynchronize(nullptr));
  } catch (const CudaError& e) {
    message = e.what();
  }
  ember_cuda_host::reset_device();
  return message;
}

inline const std::vector<DType> kAllTypes = {kBool,    kUInt8,    kInt8,    kInt16,   kInt32,     kInt64,
                                             kFloat16, kBFloat16, kFloat32, kFloat64, kComplex64, kComplex128};

}  // namespace ember::host_test
