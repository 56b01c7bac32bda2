// Element-wise ops: device checks, type promotion, broadcasting, output allocation.
#include "core/scalar_convert.h"
#include "core/type_promotion.h"
#include "ember/errors.h"
#include "ember/factories.h"
#include "ember/ops.h"
#include "kernels/dtype_dispatch.h"
#include "kernels/functors.h"
#include "kernels/op_name.h"
#include "ops/autocast.h"
#include "ops/launch.h"
#include "ops/op_entry.h"
#include "ops/overlap.h"
#include "ops/recording.h"

namespace ember {

using detail::KernelCall;
using detail::make_arg;
using detail::Operand;
using detail::OpKind;
using ember::detail::AlphaArgs;
using ember::detail::AutocastOp;
using ember::detail::Formula;
using ember::detail::op_entry;
using ember::detail::op_entry_inplace;
using ember::detail::ScalarArgs;

namespace {

DType promoted(const Tensor& a, const Tensor& b) {
  return detail::result_type({Operand::tensor(a.dtype(), a.dim()), Operand::tensor(b.dtype(), b.dim())});
}

// A 0-dim cpu tensor may join a cuda op as a scalar input: it is moved to the op's device.
void align_devices(Tensor& a, Tensor& b) {
  if (a.device() == b.device()) return;
  if (b.is_cpu() && b.dim() == 0) {
    b = b.to(a.device());
  } else if (a.is_cpu() && a.dim() == 0) {
    a = a.to(b.device());
  } else {
    detail::check_same_device(a, b);
  }
}

bool is_comparison(OpKind op) {
  return op == OpKind::Eq || op == OpKind::Ne || op == OpKind::Lt || op == OpKind::Le || op == OpKind::Gt ||
         op == OpKind::Ge;
}

constexpr const char* kBoolSubtraction =
    "Subtraction, the `-` operator, with a bool tensor is not supported. If you are trying to invert a mask, use the "
    "`~` or `logical_not()` operator instead.";

void check_op_dtype(OpKind op, DType dtype) {
  if (op == OpKind::Lt || op == OpKind::Le || op == OpKind::Gt || op == OpKind::Ge) {
    EMBER_CHECK(!is_complex(dtype), TypeError, detail::op_name(op), " is not supported for complex tensors");
  }
}

// The dtype an op computes in, given the promoted input dtype.
DType compute_dtype(OpKind op, DType promoted_dtype) {
  if ((op == OpKind::Div || op == OpKind::RDivScalar) && is_integral(promoted_dtype, true)) return default_dtype();
  return promoted_dtype;
}

// A tensor-tensor launch's arguments: add and sub carry alpha, the others none.
detail::OpArgs binary_args(OpKind op, const Scalar& alpha) {
  if (op == OpKind::Add || op == OpKind::Sub) return detail::kargs::Alpha{alpha};
  return detail::kargs::None{};
}

// The operands are taken by reference and copied only where one must be moved or converted:
// a copy is two atomic reference-count updates, a tenth of a small op on an emulated device,
// where each waits for the launch just handed to the stream's worker to leave this core.
Tensor binary(OpKind op, const Tensor& a_in, const Tensor& b_in, const Scalar& alpha = 1) {
  EMBER_CHECK(op != OpKind::Sub || (a_in.dtype() != kBool && b_in.dtype() != kBool), TypeError, kBoolSubtraction);
  if (a_in.device() != b_in.device()) [[unlikely]] {
    Tensor a = a_in, b = b_in;
    align_devices(a, b);
    return binary(op, a, b, alpha);
  }
  DType dtype = compute_dtype(op, promoted(a_in, b_in));
  check_op_dtype(op, dtype);
  // Equal shapes (the common case) need no broadcast shape of their own.
  const bool same_shape = a_in.sizes() == b_in.sizes();
  IntList broadcast;
  if (!same_shape) broadcast = detail::broadcast_shapes(a_in.sizes(), b_in.sizes());
  Tensor a_converted, b_converted;
  const Tensor& a = a_in.dtype() == dtype ? a_in : (a_converted = a_in.to(dtype));
  const Tensor& b = b_in.dtype() == dtype ? b_in : (b_converted = b_in.to(dtype));
  const IntList& shape = same_shape ? a.sizes() : broadcast;
  Tensor out = detail::empty_on(shape, is_comparison(op) ? kBool : dtype, a.device());
  KernelCall call{op, {}, {}, binary_args(op, alpha)};
  detail::add_arg(call.outputs, out);
  detail::add_arg(call.inputs, a, shape);
  detail::add_arg(call.inputs, b, shape);
  detail::launch(out.device(), call);
  return out;
}

Tensor with_scalar(OpKind op, const Tensor& a_in, const Scalar& s) {  // a_in by reference: as binary
  DType dtype = compute_dtype(op, detail::result_type({Operand::tensor(a_in.dtype(), a_in.dim()), Operand::scalar(s)}));
  check_op_dtype(op, dtype);
  Tensor a_converted;
  const Tensor& a = a_in.dtype() == dtype ? a_in : (a_converted = a_in.to(dtype));
  Tensor out = detail::empty_on(a.sizes(), is_comparison(op) ? kBool : dtype, a.device());
  KernelCall call{op, {}, {}, detail::kargs::Value{s}};
  detail::add_arg(call.outputs, out);
  detail::add_arg(call.inputs, a);
  detail::launch(out.device(), call);
  return out;
}

// `s` as a 0-dim operand in the dtype `a op s` computes in, so that it is not rounded
// through its own default dtype first (a float64 tensor compared with 0.1 uses 0.1 as
// a double).
Tensor scalar_operand(const Tensor& a, const Scalar& s) {
  DType dtype = detail::result_type({Operand::tensor(a.dtype(), a.dim()), Operand::scalar(s)});
  return full({}, s, TensorOptions(dtype).device(a.device()));
}

// Comparisons against a scalar reuse the tensor-tensor kernel with a 0-dim operand.
Tensor compare_scalar(OpKind op, const Tensor& a, const Scalar& s) { return binary(op, a, scalar_operand(a, s)); }

Tensor unary(OpKind op, const Tensor& a_in, bool float_only) {  // a_in by reference: as binary
  DType dtype = a_in.dtype();
  if (float_only && is_integral(dtype, true)) dtype = default_dtype();
  Tensor a_converted;
  const Tensor& a = a_in.dtype() == dtype ? a_in : (a_converted = a_in.to(dtype));
  DType out_dtype = op == OpKind::Abs ? to_real(dtype) : dtype;  // |complex| is real
  Tensor out = detail::empty_on(a.sizes(), out_dtype, a.device());
  KernelCall call{op};
  detail::add_arg(call.outputs, out);
  detail::add_arg(call.inputs, a);
  detail::launch(out.device(), call);
  return out;
}

void check_can_cast(DType result, DType self) {
  EMBER_CHECK(detail::can_cast(result, self), TypeError, "result type ", result,
              " can't be cast to the desired output type ", self);
}

// In place: computes in the promoted dtype, which must cast to self's dtype.
Tensor& inplace(Tensor& self, OpKind op, Tensor other, const Scalar& alpha = 1) {
  EMBER_CHECK(op != OpKind::Sub || (self.dtype() != kBool && other.dtype() != kBool), TypeError, kBoolSubtraction);
  if (other.device() != self.device() && other.is_cpu() && other.dim() == 0) other = other.to(self.device());
  detail::check_same_device(self, other);
  DType dtype = compute_dtype(op, promoted(self, other));
  check_op_dtype(op, dtype);
  check_can_cast(dtype, self.dtype());
  detail::check_no_internal_overlap(self);
  detail::check_no_partial_overlap(self, other);
  IntList broadcast;  // equal shapes (the common case) need none
  if (other.sizes() != self.sizes()) broadcast = detail::broadcast_shapes(self.sizes(), other.sizes());
  const IntList& shape = other.sizes() == self.sizes() ? self.sizes() : broadcast;
  EMBER_CHECK(shape == self.sizes(), ValueError, "output with shape ", detail::IntListPrinter{self.sizes()},
              " doesn't match the broadcast shape ", detail::IntListPrinter{shape});
  if (other.dtype() != dtype) other = other.to(dtype);
  if (dtype == self.dtype()) {
    KernelCall call{op, {}, {}, binary_args(op, alpha)};
    detail::add_arg(call.outputs, self);
    detail::add_arg(call.inputs, self);
    detail::add_arg(call.inputs, other, shape);
    detail::launch(self.device(), call);
  } else {
    self.copy_(binary(op, self, other, alpha));
  }
  return self;
}

Tensor& inplace_scalar(Tensor& self, OpKind op, const Scalar& s) {
  DType dtype = compute_dtype(op, detail::result_type({Operand::tensor(self.dtype(), self.dim()), Operand::scalar(s)}));
  check_can_cast(dtype, self.dtype());
  detail::check_no_internal_overlap(self);
  if (dtype != self.dtype()) {
    self.copy_(with_scalar(op, self, s));
    return self;
  }
  KernelCall call{op, {}, {}, detail::kargs::Value{s}};
  detail::add_arg(call.outputs, self);
  detail::add_arg(call.inputs, self);
  detail::launch(self.device(), call);
  return self;
}

Scalar negate(const Scalar& s) {
  if (s.is_complex()) return Scalar(-s.to_complex());
  if (s.is_floating_point()) return Scalar(-s.to_double());
  return Scalar(-s.to<int64_t>());
}

}  // namespace

Tensor add(const Tensor& a, const Tensor& b, const Scalar& alpha) {
  return op_entry(
      {.formula = Formula::Add, .attrs = AlphaArgs{alpha}},
      [&](const Tensor& a, const Tensor& b) { return binary(OpKind::Add, a, b, alpha); }, a, b);
}
Tensor sub(const Tensor& a, const Tensor& b, const Scalar& alpha) {
  return op_entry(
      {.formula = Formula::Sub, .attrs = AlphaArgs{alpha}},
      [&](const Tensor& a, const Tensor& b) { return binary(OpKind::Sub, a, b, alpha); }, a, b);
}
Tensor mul(const Tensor& a, const Tensor& b) {
  return op_entry(
      {.formula = Formula::Mul}, [](const Tensor& a, const Tensor& b) { return binary(OpKind::Mul, a, b); }, a, b);
}
Tensor div(const Tensor& a, const Tensor& b) {
  return op_entry(
      {.formula = Formula::Div}, [](const Tensor& a, const Tensor& b) { return binary(OpKind::Div, a, b); }, a, b);
}
Tensor pow(const Tensor& a, const Tensor& exponent) {
  return op_entry(
      {AutocastOp::kPow, Formula::Pow},
      [](const Tensor& a, const Tensor& exponent) { return binary(OpKind::Pow, a, exponent); }, a, exponent);
}
Tensor pow(const Tensor& a, const Scalar& exponent) {
  return op_entry(
      {AutocastOp::kPow, Formula::PowScalar, ScalarArgs{exponent}},
      [&](const Tensor& a) { return with_scalar(OpKind::PowScalar, a, exponent); }, a);
}
Tensor eq(const Tensor& a, const Tensor& b) { return binary(OpKind::Eq, a, b); }
Tensor ne(const Tensor& a, const Tensor& b) { return binary(OpKind::Ne, a, b); }
Tensor lt(const Tensor& a, const Tensor& b) { return binary(OpKind::Lt, a, b); }
Tensor le(const Tensor& a, const Tensor& b) { return binary(OpKind::Le, a, b); }
Tensor gt(const Tensor& a, const Tensor& b) { return binary(OpKind::Gt, a, b); }
Tensor ge(const Tensor& a, const Tensor& b) { return binary(OpKind::Ge, a, b); }

namespace {
Tensor unary_recorded(Formula formula, OpKind op, const Tensor& a, bool float_only) {
  return op_entry(
      {.formula = formula}, [&](const Tensor& a) { return unary(op, a, float_only); }, a);
}
}  // namespace

Tensor neg(const Tensor& a) {
  EMBER_CHECK(a.dtype() != kBool, TypeError,
              "Negation, the `-` operator, on a bool tensor is not supported. If you are trying to invert a mask, use "
              "the `~` or `logical_not()` operator instead.");
  return unary_recorded(Formula::Neg, OpKind::Neg, a, false);
}
Tensor abs(const Tensor& a) { return unary_recorded(Formula::Abs, OpKind::Abs, a, false); }
// exp, log, ...: integral inputs promoted to floating (Note [Declaring an op] in kernels/unary_ops.h).
// A real-only op (kRealOnlyUnary) refuses complex input here, before any launch, with the
// kernels' words.
// Each through op_entry (Note [Op entry]): autocast's policy from the op list's precision
// column, then the recorded op.
#define EMBER_FLOAT_UNARY_ENTRY(Kind, name, Functor, ...)                                         \
  Tensor name(const Tensor& a) {                                                                  \
    EMBER_CHECK(!detail::kRealOnlyUnary<detail::Functor> || !is_complex(a.dtype()), TypeError,    \
                "\"" #name "\" not implemented for '", detail::scalar_type_name(a.dtype()), "'"); \
    return op_entry(                                                                              \
        {detail::autocast_op_named(#Kind), Formula::Kind},                                        \
        [](const Tensor& x) { return unary(OpKind::Kind, x, true); }, a);                         \
  }
EMBER_FLOAT_UNARY_OPS(EMBER_FLOAT_UNARY_ENTRY)
#undef EMBER_FLOAT_UNARY_ENTRY

// atan2, ...: Note [Declaring a binary op] in kernels/op_list.h. Both inputs promoted to one
// dtype, integral ones to the default floating dtype (PyTorch's binary_float_op); complex ones
// refused with the kernels' words, before any launch.
namespace {
void check_float_binary(const char* name, const Tensor& a, const Tensor& b) {
  const DType dtype = promoted(a, b);
  EMBER_CHECK(!is_complex(dtype), TypeError, "\"", name, a.is_cuda() || b.is_cuda() ? "_cuda" : "_cpu",
              "\" not implemented for '", detail::scalar_type_name(dtype), "'");
}
Tensor float_binary(OpKind op, const Tensor& a, const Tensor& b) {
  DType dtype = promoted(a, b);
  if (is_integral(dtype, true)) dtype = default_dtype();
  return binary(op, a.to(dtype), b.to(dtype));
}
}  // namespace
#define EMBER_FLOAT_BINARY_ENTRY(Kind, name, Functor, ...)                                        \
  Tensor name(const Tensor& a, const Tensor& b) {                                                 \
    check_float_binary(#name, a, b);                                                              \
    return op_entry(                                                                              \
        {detail::autocast_op_named(#Kind), Formula::Kind},                                        \
        [](const Tensor& x, const Tensor& y) { return float_binary(OpKind::Kind, x, y); }, a, b); \
  }
EMBER_FLOAT_BINARY_OPS(EMBER_FLOAT_BINARY_ENTRY)
#undef EMBER_FLOAT_BINARY_ENTRY
Tensor relu(const Tensor& a) {
  EMBER_CHECK(a.dtype() != kBool && !is_complex(a.dtype()), TypeError, "relu is not supported for ", a.dtype());
  return unary_recorded(Formula::Relu, OpKind::Relu, a, false);
}

namespace {
Tensor scalar_op(Formula formula, OpKind op, const Tensor& a, const Scalar& s) {
  return op_entry(
      {.formula = formula, .attrs = ScalarArgs{s}}, [&](const Tensor& a) { return with_scalar(op, a, s); }, a);
}
}  // namespace

Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator-(const Tensor& a) { return neg(a); }
Tensor operator+(const Tensor& a, const Scalar& b) { return scalar_op(Formula::AddScalar, OpKind::AddScalar, a, b); }
Tensor operator-(const Tensor& a, const Scalar& b) {
  EMBER_CHECK(a.dtype() != kBool && !b.is_bool(), TypeError, kBoolSubtraction);
  return scalar_op(Formula::AddScalar, OpKind::AddScalar, a, negate(b));
}
Tensor operator*(const Tensor& a, const Scalar& b) { return scalar_op(Formula::MulScalar, OpKind::MulScalar, a, b); }
Tensor operator/(const Tensor& a, const Scalar& b) { return div(a, scalar_operand(a, b)); }
Tensor operator+(const Scalar& a, const Tensor& b) { return b + a; }
Tensor operator-(const Scalar& a, const Tensor& b) {
  EMBER_CHECK(b.dtype() != kBool && !a.is_bool(), TypeError, kBoolSubtraction);
  return scalar_op(Formula::RSubScalar, OpKind::RSubScalar, b, a);
}
Tensor operator*(const Scalar& a, const Tensor& b) { return b * a; }
Tensor operator/(const Scalar& a, const Tensor& b) { return scalar_op(Formula::RDivScalar, OpKind::RDivScalar, b, a); }

DType result_type(const Tensor& a, const Tensor& b) { return promoted(a, b); }
DType result_type(const Tensor& a, const Scalar& b) {
  return detail::result_type({Operand::tensor(a.dtype(), a.dim()), Operand::scalar(b)});
}

// ---- Tensor methods ----------------------------------------------------------
Tensor Tensor::neg() const { return ember::neg(*this); }
Tensor Tensor::abs() const { return ember::abs(*this); }
Tensor Tensor::exp() const { return ember::exp(*this); }
Tensor Tensor::log() const { return ember::log(*this); }
Tensor Tensor::sqrt() const { return ember::sqrt(*this); }
Tensor Tensor::relu() const { return ember::relu(*this); }
Tensor Tensor::sigmoid() const { return ember::sigmoid(*this); }
Tensor Tensor::tanh() const { return ember::tanh(*this); }
Tensor Tensor::rsqrt() const { return ember::rsqrt(*this); }
Tensor Tensor::erf() const { return ember::erf(*this); }
Tensor Tensor::pow(const Scalar& e) const { return ember::pow(*this, e); }
Tensor Tensor::pow(const Tensor& e) const { return ember::pow(*this, e); }
Tensor Tensor::add(const Tensor& o, const Scalar& alpha) const { return ember::add(*this, o, alpha); }
Tensor Tensor::sub(const Tensor& o, const Scalar& alpha) const { return ember::sub(*this, o, alpha); }
Tensor Tensor::mul(const Tensor& o) const { return ember::mul(*this, o); }
Tensor Tensor::div(const Tensor& o) const { return ember::div(*this, o); }
Tensor Tensor::eq(const Tensor& o) const { return ember::eq(*this, o); }
Tensor Tensor::ne(const Tensor& o) const { return ember::ne(*this, o); }
Tensor Tensor::lt(const Tensor& o) const { return ember::lt(*this, o); }
Tensor Tensor::le(const Tensor& o) const { return ember::le(*this, o); }
Tensor Tensor::gt(const Tensor& o) const { return ember::gt(*this, o); }
Tensor Tensor::ge(const Tensor& o) const { return ember::ge(*this, o); }
Tensor Tensor::eq(const Scalar& o) const { return compare_scalar(OpKind::Eq, *this, o); }
Tensor Tensor::ne(const Scalar& o) const { return compare_scalar(OpKind::Ne, *this, o); }
Tensor Tensor::lt(const Scalar& o) const { return compare_scalar(OpKind::Lt, *this, o); }
Tensor Tensor::le(const Scalar& o) const { return compare_scalar(OpKind::Le, *this, o); }
Tensor Tensor::gt(const Scalar& o) const { return compare_scalar(OpKind::Gt, *this, o); }
Tensor Tensor::ge(const Scalar& o) const { return compare_scalar(OpKind::Ge, *this, o); }

Tensor& Tensor::add_(const Tensor& o, const Scalar& alpha) {
  return op_entry_inplace(
      Formula::Add, *this, o, [&] { inplace(*this, OpKind::Add, o, alpha); }, AlphaArgs{alpha});
}
Tensor& Tensor::sub_(const Tensor& o, const Scalar& alpha) {
  return op_entry_inplace(
      Formula::Sub, *this, o, [&] { inplace(*this, OpKind::Sub, o, alpha); }, AlphaArgs{alpha});
}
Tensor& Tensor::mul_(const Tensor& o) {
  return op_entry_inplace(Formula::Mul, *this, o, [&] { inplace(*this, OpKind::Mul, o); });
}
Tensor& Tensor::div_(const Tensor& o) {
  return op_entry_inplace(Formula::Div, *this, o, [&] { inplace(*this, OpKind::Div, o); });
}
Tensor& Tensor::operator+=(const Scalar& o) {
  return op_entry_inplace(
      Formula::AddScalar, *this, Tensor(), [&] { inplace_scalar(*this, OpKind::AddScalar, o); }, ScalarArgs{o});
}
Tensor& Tensor::operator-=(const Scalar& o) {
  EMBER_CHECK(dtype() != kBool && !o.is_bool(), TypeError, kBoolSubtraction);
  Scalar negated = negate(o);
  return op_entry_inplace(
      Formula::AddScalar, *this, Tensor(), [&] { inplace_scalar(*this, OpKind::AddScalar, negated); },
      ScalarArgs{negated});
}
Tensor& Tensor::operator*=(const Scalar& o) {
  return op_entry_inplace(
      Formula::MulScalar, *this, Tensor(), [&] { inplace_scalar(*this, OpKind::MulScalar, o); }, ScalarArgs{o});
}
Tensor& Tensor::operator/=(const Scalar& o) { return div_(scalar_operand(*this, o)); }

Tensor& Tensor::fill_(const Scalar& value) {
  // As c10::checked_convert: a value the dtype cannot hold is refused, not wrapped.
  detail::dispatch(dtype(), [&]<typename T>(detail::TypeTag<T>) { (void)detail::checked_to<T>(value); });
  return op_entry_inplace(Formula::Fill, *this, Tensor(), [&] {
    KernelCall call{OpKind::Fill, {detail::make_arg(*this)}, {}, detail::kargs::Value{value}};
    detail::launch(device(), call);
  });
}
Tensor& Tensor::zero_() { return fill_(0); }

}  // namespace ember
