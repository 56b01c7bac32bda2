// where, clamp and masked_fill: element-wise selection with broadcasting and promotion.
#include "core/type_promotion.h"
#include "ember/errors.h"
#include "ember/factories.h"
#include "ember/ops.h"
#include "kernels/dtype_dispatch.h"
#include "ops/launch.h"
#include "ops/op_entry.h"

namespace ember {

using detail::KernelCall;
using detail::make_arg;
using detail::Operand;
using detail::OpKind;

namespace {

// A 0-dim cpu tensor joins an op on another device as a scalar, as in element-wise ops.
Tensor on_device(const Tensor& t, Device device) {
  if (t.device() != device && t.is_cpu() && t.dim() == 0) return t.to(device);
  return t;
}

Tensor as_dtype(const Tensor& t, DType dtype) { return t.dtype() == dtype ? t : t.to(dtype); }

// A scalar as a 0-dim tensor of `dtype` on `device`.
Tensor scalar_tensor(const Scalar& s, DType dtype, Device device) {
  return full({}, s, TensorOptions(dtype).device(device));
}

// The device an op on these tensors runs on: the first that is not a 0-dim cpu tensor.
Device op_device(std::initializer_list<const Tensor*> tensors) {
  for (const Tensor* t : tensors) {
    if (t->defined() && !(t->is_cpu() && t->dim() == 0)) return t->device();
  }
  return (*tensors.begin())->device();
}

Tensor select_where(const Tensor& cond_in, const Tensor& a_in, const Tensor& b_in, DType dtype) {
  EMBER_CHECK(cond_in.dtype() == kBool, TypeError,
              "where expected condition to be a boolean tensor, but got a tensor "
              "with dtype ",
              detail::scalar_type_name(cond_in.dtype()));
  const Device device = op_device({&cond_in, &a_in, &b_in});
  Tensor cond = on_device(cond_in, device), a = on_device(a_in, device), b = on_device(b_in, device);
  detail::check_same_device(cond, a);
  detail::check_same_device(cond, b);
  IntList shape = detail::broadcast_shapes(detail::broadcast_shapes(cond.sizes(), a.sizes()), b.sizes());
  a = as_dtype(a, dtype);
  b = as_dtype(b, dtype);
  Tensor out = detail::empty_on(shape, dtype, device);
  KernelCall call{OpKind::Where, {make_arg(out)}, {make_arg(cond, shape), make_arg(a, shape), make_arg(b, shape)}};
  detail::launch(device, call);
  return out;
}

void check_clamp_dtype(DType dtype) {
  EMBER_CHECK(!is_complex(dtype), TypeError, "clamp is not supported for complex types");
}

}  // namespace

namespace {
// Where's node: inputs (condition, taken where true, taken where false); a scalar side
// is an undefined input.
// No precision row: `compute` reads the inputs it captured.
template <typename F>
Tensor recorded_where(const Tensor& cond, const Tensor& a, const Tensor& b, F&& compute, const char* name = nullptr) {
  return ember::detail::op_entry(
      {.formula = ember::detail::Formula::Where, .attrs = ember::detail::Attrs(ember::detail::NoArgs{}, name)},
      [&](const Tensor&, const Tensor&, const Tensor&) { return compute(); }, cond, a, b);
}
const Tensor kNone;
}  // namespace

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  return recorded_where(cond, a, b, [&] { return select_where(cond, a, b, result_type(a, b)); });
}

Tensor where(const Tensor& cond, const Scalar& a, const Tensor& b) {
  return recorded_where(cond, kNone, b, [&] {
    DType dtype = result_type(b, a);
    return select_where(cond, scalar_tensor(a, dtype, b.device()), b, dtype);
  });
}

Tensor where(const Tensor& cond, const Tensor& a, const Scalar& b) {
  return recorded_where(cond, a, kNone, [&] {
    DType dtype = result_type(a, b);
    return select_where(cond, a, scalar_tensor(b, dtype, a.device()), dtype);
  });
}

Tensor clamp(const Tensor& a, const std::optional<Scalar>& min, const std::optional<Scalar>& max) {
  EMBER_CHECK(min || max, ValueError, "torch.clamp: At least one of 'min' or 'max' must not be None");
  detail::ResultTypeState promotion;
  promotion.update(Operand::tensor(a.dtype(), a.dim()));
  if (min) promotion.update(Operand::scalar(*min));
  if (max) promotion.update(Operand::scalar(*max));
  const DType dtype = promotion.result();
  check_clamp_dtype(dtype);
  Tensor x = as_dtype(a, dtype);
  Tensor out = detail::empty_on(x.sizes(), dtype, x.device());
  KernelCall call{OpKind::ClampScalar,
                  {make_arg(out)},
                  {make_arg(x)},
                  detail::kargs::ClampScalar{min.value_or(0), max.value_or(0), min.has_value(), max.has_value()}};
  detail::launch(out.device(), call);
  if (ember::detail::should_record(a)) {
    ember::detail::ClampArgs attrs{min.value_or(0), max.value_or(0), min.has_value(), max.has_value()};
    ember::detail::record(ember::detail::Formula::ClampScalar, {a}, out, std::move(attrs));
  }
  return out;
}

Tensor clamp(const Tensor& a, const Tensor& min, const Tensor& max) {
  auto compute = [](const Tensor& a, const Tensor& min, const Tensor& max) {
    EMBER_CHECK(min.defined() || max.defined(), ValueError,
                "torch.clamp: At least one of 'min' or 'max' must not be None");
    detail::ResultTypeState promotion;
    promotion.update(Operand::tensor(a.dtype(), a.dim()));
    IntList shape = a.sizes();
    for (const Tensor* bound : {&min, &max}) {
      if (!bound->defined()) continue;
      promotion.update(Operand::tensor(bound->dtype(), bound->dim()));
      shape = detail::broadcast_shapes(shape, bound->sizes());
    }
    const DType dtype = promotion.result();
    check_clamp_dtype(dtype);
    const Device device = op_device({&a, &min, &max});
    Tensor x = as_dtype(on_device(a, device), dtype);
    // An absent bound is passed as x itself; the dim bits tell the kernel to ignore it.
    Tensor lo = min.defined() ? as_dtype(on_device(min, device), dtype) : x;
    Tensor hi = max.defined() ? as_dtype(on_device(max, device), dtype) : x;
    detail::check_same_device(x, lo);
    detail::check_same_device(x, hi);
    Tensor out = detail::empty_on(shape, dtype, device);
    KernelCall call{OpKind::Clamp, {make_arg(out)}, {make_arg(x, shape), make_arg(lo, shape), make_arg(hi, shape)}};
    call.args = detail::kargs::Clamp{min.defined(), max.defined()};
    detail::launch(device, call);
    return out;
  };
  return ember::detail::op_entry({.formula = ember::detail::Formula::Clamp}, compute, a, min, max);
}

Tensor masked_fill(const Tensor& a, const Tensor& mask, const Tensor& value) {
  EMBER_CHECK(mask.dtype() == kBool, TypeError, "masked_fill_ only supports boolean masks, but got mask with dtype ",
              detail::scalar_type_name(mask.dtype()));
  EMBER_CHECK(value.dim() == 0, ValueError,
              "masked_fill_ only supports a 0-dimensional value tensor, but got tensor "
              "with ",
              value.dim(), " dimension(s).");
  return recorded_where(
      mask, value, a, [&] { return select_where(mask, as_dtype(value, a.dtype()), a, a.dtype()); },
      "MaskedFillBackward0");
}

Tensor masked_fill(const Tensor& a, const Tensor& mask, const Scalar& value) {
  EMBER_CHECK(mask.dtype() == kBool, TypeError, "masked_fill_ only supports boolean masks, but got mask with dtype ",
              detail::scalar_type_name(mask.dtype()));
  return recorded_where(
      mask, kNone, a, [&] { return select_where(mask, scalar_tensor(value, a.dtype(), a.device()), a, a.dtype()); },
      "MaskedFillBackward0");
}

Tensor Tensor::clamp(const std::optional<Scalar>& min, const std::optional<Scalar>& max) const {
  return ember::clamp(*this, min, max);
}
Tensor Tensor::clamp(const Tensor& min, const Tensor& max) const { return ember::clamp(*this, min, max); }
Tensor Tensor::masked_fill(const Tensor& mask, const Scalar& value) const {
  return ember::masked_fill(*this, mask, value);
}
Tensor Tensor::masked_fill(const Tensor& mask, const Tensor& value) const {
  return ember::masked_fill(*this, mask, value);
}

}  // namespace ember
