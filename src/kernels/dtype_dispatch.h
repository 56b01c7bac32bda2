// DType -> C++ type dispatch for kernel code: one switch, then templates.
//
// Kernels are written as templates over the element type; `dispatch` turns the
// runtime DType into a call of a generic lambda with a TypeTag<T>, so every loop
// below the switch is monomorphic (no per-element virtual calls or function pointers).
#pragma once

#include <complex>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "ember/dtype.h"
#include "ember/errors.h"
#include "ember/half.h"

namespace ember::detail {

template <typename T>
struct TypeTag {
  using type = T;
};

template <typename T>
inline constexpr bool is_complex_v = false;
template <typename T>
inline constexpr bool is_complex_v<std::complex<T>> = true;
template <typename T>
inline constexpr bool is_reduced_float_v = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;
/// Floating (including half types), not complex.
template <typename T>
inline constexpr bool is_floating_v = std::is_floating_point_v<T> || is_reduced_float_v<T>;

/// Bytes per element; local to kernels so they do not depend on the core library.
constexpr size_t itemsize(DType dtype) noexcept {
  switch (dtype) {
    case DType::Bool:
    case DType::UInt8:
    case DType::Int8: return 1;
    case DType::Int16:
    case DType::Float16:
    case DType::BFloat16: return 2;
    case DType::Int32:
    case DType::Float32: return 4;
    case DType::Int64:
    case DType::Float64:
    case DType::Complex64: return 8;
    case DType::Complex128: return 16;
  }
  return 0;
}

/// PyTorch's scalar type names, used in "not implemented for 'Long'" messages.
constexpr const char* scalar_type_name(DType dtype) noexcept {
  switch (dtype) {
    case DType::Bool: return "Bool";
    case DType::UInt8: return "Byte";
    case DType::Int8: return "Char";
    case DType::Int16: return "Short";
    case DType::Int32: return "Int";
    case DType::Int64: return "Long";
    case DType::Float16: return "Half";
    case DType::BFloat16: return "BFloat16";
    case DType::Float32: return "Float";
    case DType::Float64: return "Double";
    case DType::Complex64: return "ComplexFloat";
    case DType::Complex128: return "ComplexDouble";
  }
  return "?";
}

/// Calls f(TypeTag<T>{}) with T the element type of `dtype`.
template <typename F>
decltype(auto) dispatch(DType dtype, F&& f) {
  switch (dtype) {
    case DType::Bool: return f(TypeTag<bool>{});
    case DType::UInt8: return f(TypeTag<uint8_t>{});
    case DType::Int8: return f(TypeTag<int8_t>{});
    case DType::Int16: return f(TypeTag<int16_t>{});
    case DType::Int32: return f(TypeTag<int32_t>{});
    case DType::Int64: return f(TypeTag<int64_t>{});
    case DType::Float16: return f(TypeTag<Half>{});
    case DType::BFloat16: return f(TypeTag<BFloat16>{});
    case DType::Float32: return f(TypeTag<float>{});
    case DType::Float64: return f(TypeTag<double>{});
    case DType::Complex64: return f(TypeTag<std::complex<float>>{});
    case DType::Complex128: return f(TypeTag<std::complex<double>>{});
  }
  fail<ValueError>("unknown dtype ", static_cast<int>(dtype));
}

// The dtype classes a kernel takes: the driver's dispatch_if instantiates a kernel for the
// dtypes of its class and refuses the others; the cpu's kernels check the same classes, and the
// op list's family rows name them (kernels/op_list.h).
template <typename T>
inline constexpr bool is_numeric_v = !std::is_same_v<T, bool>;
template <typename T>
inline constexpr bool is_real_v = !is_complex_v<T>;
template <typename T>
inline constexpr bool is_float_or_complex_v = is_floating_v<T> || is_complex_v<T>;
template <typename T>
struct AnyType : std::true_type {};
template <typename T>
struct NumericType : std::bool_constant<is_numeric_v<T>> {};
template <typename T>
struct RealType_ : std::bool_constant<is_real_v<T>> {};
template <typename T>
struct RealNumericType : std::bool_constant<is_real_v<T> && is_numeric_v<T>> {};
template <typename T>
struct FloatType : std::bool_constant<is_floating_v<T>> {};
template <typename T>
struct FloatComplexType : std::bool_constant<is_float_or_complex_v<T>> {};
template <typename T>
struct IntegerType : std::bool_constant<std::is_integral_v<T> && !std::is_same_v<T, bool>> {};

}  // namespace ember::detail
