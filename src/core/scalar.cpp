// Scalar::dtype: the dtype torch.tensor(value) infers for a Python number.
#include "ember/scalar.h"

namespace ember {

DType Scalar::dtype() const noexcept {
  switch (kind_) {
    case Kind::Bool: return kBool;
    case Kind::Int: return kInt64;
    case Kind::Float: return default_dtype();
    case Kind::Complex: break;
  }
  // The default complex dtype pairs with the default floating dtype.
  return default_dtype() == kFloat64 ? kComplex128 : kComplex64;
}

}  // namespace ember
