// torch.result_type: the dtype an operation computes in, given its operands.
//
// Note [Result type categories]
// PyTorch does not simply promote all operand dtypes. Operands fall in three
// priority classes: dimensioned tensors > zero-dim tensors > wrapped scalars
// (C++ numbers passed where a tensor is expected). Within a class dtypes
// promote as promote_types does. Across classes a lower-priority operand only
// counts when its category (bool < integral < floating < complex) is higher
// than the higher-priority result; then a wrapped float scalar contributes the
// default dtype (float32), a wrapped complex scalar the default complex dtype,
// so int32_tensor * 2.5 is float32, float16_tensor * 2.5 stays float16,
// float64_tensor * 1j is complex128 and bool_tensor + 1 is int64.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <span>

#include "ember/dtype.h"
#include "ember/scalar.h"

namespace ember::detail {

/// One input of an operation, as far as type promotion cares.
struct Operand {
  enum class Kind : int8_t { Tensor, ZeroDim, Scalar };
  DType dtype;
  Kind kind;

  /// A tensor with `dim` dimensions (0 makes it a zero-dim tensor).
  static Operand tensor(DType dtype, int64_t dim) { return {dtype, dim > 0 ? Kind::Tensor : Kind::ZeroDim}; }
  /// A wrapped number.
  static Operand scalar(const Scalar& value) { return {value.dtype(), Kind::Scalar}; }
};

/// Accumulates operands one at a time (c10's ResultTypeState), for callers
/// that walk their inputs; result_type() below is the one-shot form.
class ResultTypeState {
 public:
  void update(const Operand& operand);
  /// The result dtype; ValueError if no operand was given.
  DType result() const;

 private:
  std::optional<DType> dim_result_;
  std::optional<DType> zero_dim_result_;
  std::optional<DType> scalar_result_;
};

/// torch.can_cast: whether a result of dtype `from` may be written into a `to` tensor
/// (no complex to real, floating to integral, or non-bool to bool).
bool can_cast(DType from, DType to) noexcept;

/// torch.result_type over all operands; ValueError when there are none.
DType result_type(std::span<const Operand> operands);
DType result_type(std::initializer_list<Operand> operands);

}  // namespace ember::detail
