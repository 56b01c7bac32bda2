// torch.result_type; see Note [Result type categories] in type_promotion.h.
#include "core/type_promotion.h"

#include "ember/errors.h"

namespace ember::detail {
namespace {

using Maybe = std::optional<DType>;

Maybe promote(Maybe a, DType b) { return a ? promote_types(*a, b) : b; }

// Complex type with `real`'s precision. PyTorch maps float16 to complex32,
// which ember lacks; the nearest wider type is complex64.
DType complex_of(DType real) { return real == kFloat64 ? kComplex128 : kComplex64; }

// c10's combine_categories: `higher` comes from the higher-priority class.
Maybe combine(Maybe higher, Maybe lower) {
  if (!higher) return lower;
  if (!lower) return higher;
  if (is_complex(*higher)) return higher;
  if (is_complex(*lower)) {
    // A floating higher keeps its precision and becomes complex.
    return is_floating_point(*higher) ? complex_of(*higher) : *lower;
  }
  if (is_floating_point(*higher)) return higher;
  if (*higher == kBool || is_floating_point(*lower)) return promote_types(*higher, *lower);
  return higher;
}

}  // namespace

void ResultTypeState::update(const Operand& operand) {
  switch (operand.kind) {
    case Operand::Kind::Tensor: dim_result_ = promote(dim_result_, operand.dtype); break;
    case Operand::Kind::ZeroDim: zero_dim_result_ = promote(zero_dim_result_, operand.dtype); break;
    case Operand::Kind::Scalar: {
      // A wrapped number carries only its category; its precision is the default's.
      DType dtype = operand.dtype;
      if (is_complex(dtype)) dtype = complex_of(default_dtype());
      else if (is_floating_point(dtype)) dtype = default_dtype();
      scalar_result_ = promote(scalar_result_, dtype);
      break;
    }
  }
}

DType ResultTypeState::result() const {
  Maybe result = combine(dim_result_, combine(zero_dim_result_, scalar_result_));
  EMBER_CHECK(result.has_value(), ValueError, "result_type: expected at least one tensor or scalar operand");
  return *result;
}

DType result_type(std::span<const Operand> operands) {
  ResultTypeState state;
  for (const Operand& operand : operands) state.update(operand);
  return state.result();
}

DType result_type(std::initializer_list<Operand> operands) {
  return result_type(std::span<const Operand>(operands.begin(), operands.size()));
}

bool can_cast(DType from, DType to) noexcept {
  if (is_complex(from) && !is_complex(to)) return false;
  if (is_floating_point(from) && is_integral(to, /*include_bool=*/true)) return false;
  if (from != kBool && to == kBool) return false;
  return true;
}

}  // namespace ember::detail
