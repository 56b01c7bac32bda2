// Device-side support shared by the driver's .cu files: the device element types,
// complex math for the shared functors, dtype sets, and launch geometry.
//
// Kernel bodies are the backend-neutral functors of kernels/functors.h (Note [One
// launch choke point]); they compute in compute_t<T> and are EMBER_HOST_DEVICE. The
// only thing the device needs in addition is complex math: std::complex is host-only,
// so complex tensors are ::cuda::std::complex<R> on the device (same layout as
// std::complex, two R), and the functors whose bodies call std:: complex math are
// specialised below to call cuda::std instead. Everything else is shared as is.
#pragma once

#include <cuda_runtime_api.h>
#include <cuda/std/complex>

#include <complex>
#include <type_traits>

#include "backends/cuda/cuda_ops.h"
#include "ember/errors.h"
#include "kernels/convert.h"
#include "kernels/dtype_dispatch.h"
#include "kernels/functors.h"

namespace ember::detail {

template <typename T>
inline constexpr bool is_complex_v<::cuda::std::complex<T>> = true;
template <typename T>
struct RealType<::cuda::std::complex<T>> {
  using type = T;
};

namespace driver {

template <typename T>
struct DeviceType {
  using type = T;
};
template <typename R>
struct DeviceType<std::complex<R>> {
  using type = ::cuda::std::complex<R>;
};
/// The type an element of storage type T has in device code.
template <typename T>
using device_t = typename DeviceType<T>::type;

// ---- dtype sets: which element types an op is compiled for (the classes: kernels/dtype_dispatch.h)

/// Calls f(TypeTag<device_t<T>>{}) when the element type T of `dtype` satisfies
/// Allowed<T>; otherwise throws PyTorch's TypeError ("\"pow\" not implemented for 'Bool'"),
/// worded as the CPU executor words it so both backends fail alike.
template <template <typename> class Allowed, typename F>
void dispatch_if(DType dtype, const char* op, F&& f) {
  dispatch(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (Allowed<T>::value) {
      f(TypeTag<device_t<T>>{});
    } else {
      fail<TypeError>("\"", op, "\" not implemented for '", scalar_type_name(dtype), "'");
    }
  });
}

/// A Scalar as the compute type C of a kernel (host side).
template <typename C>
C scalar_as(const Scalar& s) {
  if constexpr (is_complex_v<C>) {
    using R = real_t<C>;
    auto z = s.to<std::complex<R>>();
    return C(z.real(), z.imag());
  } else {
    return s.to<C>();
  }
}

}  // namespace driver

// ---- complex math for the shared functors (device code) -------------------------------
template <typename R>
struct PowFn<::cuda::std::complex<R>> {
  using C = ::cuda::std::complex<R>;
  EMBER_HOST_DEVICE C operator()(C a, C b) const { return ::cuda::std::pow(a, b); }
};
template <typename R>
struct PowScalarFn<::cuda::std::complex<R>> {
  using C = ::cuda::std::complex<R>;
  C s;
  EMBER_HOST_DEVICE C operator()(C a) const { return ::cuda::std::pow(a, s); }
};
template <typename R>
struct AbsFn<::cuda::std::complex<R>> {
  EMBER_HOST_DEVICE R operator()(::cuda::std::complex<R> a) const { return ::cuda::std::abs(a); }
};
template <typename R>
struct ExpFn<::cuda::std::complex<R>> {
  using C = ::cuda::std::complex<R>;
  EMBER_HOST_DEVICE C operator()(C a) const { return ::cuda::std::exp(a); }
};
template <typename R>
struct LogFn<::cuda::std::complex<R>> {
  using C = ::cuda::std::complex<R>;
  EMBER_HOST_DEVICE C operator()(C a) const { return ::cuda::std::log(a); }
};
template <typename R>
struct SqrtFn<::cuda::std::complex<R>> {
  using C = ::cuda::std::complex<R>;
  EMBER_HOST_DEVICE C operator()(C a) const { return ::cuda::std::sqrt(a); }
};
template <typename R>
struct SigmoidFn<::cuda::std::complex<R>> {
  using C = ::cuda::std::complex<R>;
  EMBER_HOST_DEVICE C operator()(C a) const { return C(1) / (C(1) + ::cuda::std::exp(-a)); }
};
template <typename R>
struct TanhFn<::cuda::std::complex<R>> {
  using C = ::cuda::std::complex<R>;
  EMBER_HOST_DEVICE C operator()(C a) const { return ::cuda::std::tanh(a); }
};
template <typename R>
struct IsCloseFn<::cuda::std::complex<R>> {
  using C = ::cuda::std::complex<R>;
  R atol, rtol;
  bool equal_nan;
  EMBER_HOST_DEVICE bool operator()(C a, C b) const {
    if (a == b) return true;
    if (equal_nan && is_nan(a) && is_nan(b)) return true;
    R actual = ::cuda::std::abs(a - b);
    R allowed = atol + ::cuda::std::abs(rtol * b);
    return isfinite(actual) && actual <= allowed;
  }
};

}  // namespace ember::detail
