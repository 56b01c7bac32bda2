// DType properties and torch.promote_types.
#include "ember/dtype.h"

#include <ostream>

#include "ember/errors.h"

namespace ember {
namespace {

int index_of(DType dtype) { return static_cast<int>(dtype); }

struct DTypeInfo {
  const char* name;
  size_t size;
};

constexpr DTypeInfo kInfo[kNumDTypes] = {
    {"bool", 1},    {"uint8", 1},    {"int8", 1},    {"int16", 2},   {"int32", 4},     {"int64", 8},
    {"float16", 2}, {"bfloat16", 2}, {"float32", 4}, {"float64", 8}, {"complex64", 8}, {"complex128", 16},
};

bool is_signed_integral(DType dtype) { return dtype == kInt8 || dtype == kInt16 || dtype == kInt32 || dtype == kInt64; }

}  // namespace

size_t element_size(DType dtype) noexcept { return kInfo[index_of(dtype)].size; }

const char* dtype_name(DType dtype) noexcept { return kInfo[index_of(dtype)].name; }

bool is_floating_point(DType dtype) noexcept {
  return dtype == kFloat16 || dtype == kBFloat16 || dtype == kFloat32 || dtype == kFloat64;
}

bool is_complex(DType dtype) noexcept { return dtype == kComplex64 || dtype == kComplex128; }

bool is_integral(DType dtype, bool include_bool) noexcept {
  return dtype == kUInt8 || is_signed_integral(dtype) || (include_bool && dtype == kBool);
}

// PyTorch's promotion table (c10/core/ScalarType.cpp) follows a few rules,
// which are written out here instead of as a 12x12 table:
//  - bool joins anything as the other type;
//  - integers widen; uint8 with a signed type needs a signed type wider than
//    8 bits (uint8 + int8 -> int16);
//  - integer with floating or complex is the floating or complex type;
//  - float16 with bfloat16 is float32 (neither holds the other), other
//    floating pairs take the wider;
//  - complex with anything is the complex type whose real part is the
//    promotion of both real parts (complex64 + float64 -> complex128).
DType promote_types(DType a, DType b) {
  if (a == b) return a;
  if (a == kBool) return b;
  if (b == kBool) return a;
  if (is_complex(a) || is_complex(b)) {
    DType real = promote_types(to_real(a), to_real(b));
    return real == kFloat64 ? kComplex128 : kComplex64;
  }
  bool a_float = is_floating_point(a);
  bool b_float = is_floating_point(b);
  if (a_float != b_float) return a_float ? a : b;
  if (a_float) {
    if ((a == kFloat16 && b == kBFloat16) || (a == kBFloat16 && b == kFloat16)) return kFloat32;
    return element_size(a) >= element_size(b) ? a : b;
  }
  // Both integral and different; at most one is uint8.
  if (a == kUInt8) return b == kInt8 ? kInt16 : b;
  if (b == kUInt8) return a == kInt8 ? kInt16 : a;
  return element_size(a) >= element_size(b) ? a : b;
}

DType to_real(DType dtype) noexcept {
  if (dtype == kComplex64) return kFloat32;
  if (dtype == kComplex128) return kFloat64;
  return dtype;
}

DType to_complex(DType dtype) {
  switch (dtype) {
    case kFloat32:
    case kComplex64: return kComplex64;
    case kFloat64:
    case kComplex128: return kComplex128;
    default: break;
  }
  // PyTorch maps float16 to complex32, which ember does not have.
  detail::fail<TypeError>("to_complex: expected float32, float64 or a complex dtype, but got ", dtype);
}

DType default_dtype() noexcept { return kFloat32; }

std::ostream& operator<<(std::ostream& out, DType dtype) { return out << "torch." << dtype_name(dtype); }

}  // namespace ember
