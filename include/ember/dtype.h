// Element types and PyTorch's type promotion.
#pragma once

#include <complex>
#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <string>

#include "ember/half.h"

namespace ember {

// clang-format off
enum class DType : int8_t {
  Bool, UInt8, Int8, Int16, Int32, Int64, Float16, BFloat16, Float32, Float64, Complex64, Complex128,
};
// clang-format on
inline constexpr int kNumDTypes = 12;

inline constexpr DType kBool = DType::Bool;
inline constexpr DType kUInt8 = DType::UInt8;
inline constexpr DType kInt8 = DType::Int8;
inline constexpr DType kInt16 = DType::Int16;
inline constexpr DType kInt32 = DType::Int32;
inline constexpr DType kInt64 = DType::Int64;
inline constexpr DType kFloat16 = DType::Float16;
inline constexpr DType kHalf = DType::Float16;
inline constexpr DType kBFloat16 = DType::BFloat16;
inline constexpr DType kFloat32 = DType::Float32;
inline constexpr DType kFloat = DType::Float32;
inline constexpr DType kFloat64 = DType::Float64;
inline constexpr DType kDouble = DType::Float64;
inline constexpr DType kComplex64 = DType::Complex64;
inline constexpr DType kComplex128 = DType::Complex128;

/// Bytes per element.
size_t element_size(DType dtype) noexcept;
/// "float32", "int64", ...
const char* dtype_name(DType dtype) noexcept;
bool is_floating_point(DType dtype) noexcept;  // float16, bfloat16, float32, float64
bool is_complex(DType dtype) noexcept;
bool is_integral(DType dtype, bool include_bool = false) noexcept;

/// torch.promote_types: the smallest type both convert to without losing category.
DType promote_types(DType a, DType b);
/// The real type of a complex type (complex64 -> float32); other types map to themselves.
DType to_real(DType dtype) noexcept;
/// The complex type of a floating type (float32 -> complex64); complex types map to themselves.
DType to_complex(DType dtype);

/// The default floating dtype (float32), as torch.get_default_dtype().
DType default_dtype() noexcept;

std::ostream& operator<<(std::ostream& out, DType dtype);  // prints "torch.float32"

/// C++ element type of each dtype.
// clang-format off
template <DType D> struct dtype_traits;
template <> struct dtype_traits<DType::Bool> { using type = bool; };
template <> struct dtype_traits<DType::UInt8> { using type = uint8_t; };
template <> struct dtype_traits<DType::Int8> { using type = int8_t; };
template <> struct dtype_traits<DType::Int16> { using type = int16_t; };
template <> struct dtype_traits<DType::Int32> { using type = int32_t; };
template <> struct dtype_traits<DType::Int64> { using type = int64_t; };
template <> struct dtype_traits<DType::Float16> { using type = Half; };
template <> struct dtype_traits<DType::BFloat16> { using type = BFloat16; };
template <> struct dtype_traits<DType::Float32> { using type = float; };
template <> struct dtype_traits<DType::Float64> { using type = double; };
template <> struct dtype_traits<DType::Complex64> { using type = std::complex<float>; };
template <> struct dtype_traits<DType::Complex128> { using type = std::complex<double>; };
// clang-format on
template <DType D>
using dtype_t = typename dtype_traits<D>::type;

/// The dtype of a C++ element type.
// clang-format off
template <typename T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<bool>() { return kBool; }
template <> constexpr DType dtype_of<uint8_t>() { return kUInt8; }
template <> constexpr DType dtype_of<int8_t>() { return kInt8; }
template <> constexpr DType dtype_of<int16_t>() { return kInt16; }
template <> constexpr DType dtype_of<int32_t>() { return kInt32; }
template <> constexpr DType dtype_of<int64_t>() { return kInt64; }
template <> constexpr DType dtype_of<Half>() { return kFloat16; }
template <> constexpr DType dtype_of<BFloat16>() { return kBFloat16; }
template <> constexpr DType dtype_of<float>() { return kFloat32; }
template <> constexpr DType dtype_of<double>() { return kFloat64; }
template <> constexpr DType dtype_of<std::complex<float>>() { return kComplex64; }
template <> constexpr DType dtype_of<std::complex<double>>() { return kComplex128; }
// clang-format on

}  // namespace ember
