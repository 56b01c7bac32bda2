// Factories: empty, zeros, ones, full, arange, tensor, *_like and new_*.
#include <cmath>
#include <optional>

#include "core/scalar_convert.h"
#include "core/tensor_impl.h"
#include "ember/errors.h"
#include "ember/factories.h"
#include "kernels/dtype_dispatch.h"
#include "ops/launch.h"
#include "runtime/context.h"

namespace ember {

namespace {

// Fills in what options leave open: `like`'s dtype and device, then the defaults.
TensorOptions merge(const TensorOptions& options, const Tensor& like) {
  TensorOptions out = options;
  if (!out.has_dtype()) out = out.dtype(like.dtype());
  if (!out.has_device()) out = out.device(like.device());
  return out;
}

Tensor allocate(const IntList& shape, const TensorOptions& options) {
  Device device = detail::resolve_device(options.device());
  EMBER_CHECK(!options.pinned_memory() || device.is_cpu(), ValueError,
              "Only dense CPU tensors can be pinned, but the device is ", device);
  return detail::make_tensor(shape, options.dtype(), device, options.pinned_memory());
}

// requires_grad is set last, once the values are written: a leaf that requires grad
// refuses in-place writes.
Tensor leaf(Tensor t, const TensorOptions& options) {
  if (options.requires_grad()) t.requires_grad_(true);
  return t;
}

// The shape of nested lists, read along their first elements.
IntList shape_of(const TensorData& data) {
  IntList shape;
  for (const TensorData* p = &data; !p->is_leaf(); p = &p->items()[0]) {
    shape.push_back(static_cast<int64_t>(p->items().size()));
    if (p->items().empty()) break;
  }
  return shape;
}

// Checks that every list matches `shape` (ValueError for ragged lists) and promotes the
// numbers' dtypes.
void check_lists(const TensorData& data, const IntList& shape, size_t depth, std::optional<DType>& dtype) {
  if (data.is_leaf()) {
    EMBER_CHECK(depth == shape.size(), ValueError, "expected sequence of length ", shape[depth], " at dim ", depth,
                " (got a number)");
    DType d = data.value().dtype();
    dtype = dtype ? promote_types(*dtype, d) : d;
    return;
  }
  int64_t n = static_cast<int64_t>(data.items().size());
  EMBER_CHECK(depth < shape.size() && shape[depth] == n, ValueError, "expected sequence of length ",
              depth < shape.size() ? shape[depth] : 0, " at dim ", depth, " (got ", n, ")");
  for (const TensorData& item : data.items()) check_lists(item, shape, depth + 1, dtype);
}

// The name torch.tensor uses for an integer dtype in its overflow error.
template <typename T>
constexpr const char* integer_dtype_name() {
  if constexpr (std::is_same_v<T, uint8_t>) return "uint8";
  else if constexpr (std::is_same_v<T, int8_t>) return "int8";
  else if constexpr (std::is_same_v<T, int16_t>) return "int16";
  else if constexpr (std::is_same_v<T, int32_t>) return "int32";
  else return "int64";
}

// As torch.tensor: integers that do not fit an integer dtype and complex numbers for a
// real dtype are refused; floating dtypes take any real number (overflowing to inf).
template <typename T>
T tensor_element(const Scalar& value) {
  if constexpr (!detail::is_complex_v<T>) {
    EMBER_CHECK(!value.is_complex(), TypeError, "must be real number, not complex");
  }
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    EMBER_CHECK(!detail::overflows<T>(value), ValueError, "value cannot be converted to type ", integer_dtype_name<T>(),
                " without overflow");
  }
  return value.to<T>();
}

template <typename T>
void flatten_into(const TensorData& data, T*& out) {
  if (data.is_leaf()) {
    *out++ = tensor_element<T>(data.value());
    return;
  }
  for (const TensorData& item : data.items()) flatten_into(item, out);
}

}  // namespace

Tensor empty(const IntList& shape, const TensorOptions& options) { return leaf(allocate(shape, options), options); }
Tensor zeros(const IntList& shape, const TensorOptions& options) {
  return leaf(allocate(shape, options).fill_(0), options);
}
Tensor ones(const IntList& shape, const TensorOptions& options) {
  return leaf(allocate(shape, options).fill_(1), options);
}

Tensor full(const IntList& shape, const Scalar& value, const TensorOptions& options) {
  TensorOptions o = options.has_dtype() ? options : options.dtype(value.dtype());
  return leaf(allocate(shape, o).fill_(value), options);
}

Tensor arange(const Scalar& end, const TensorOptions& options) { return arange(0, end, 1, options); }

Tensor arange(const Scalar& start, const Scalar& end, const Scalar& step, const TensorOptions& options) {
  bool floating = start.is_floating_point() || end.is_floating_point() || step.is_floating_point();
  TensorOptions o = options.has_dtype() ? options : options.dtype(floating ? default_dtype() : kInt64);
  double s = start.to_double(), e = end.to_double(), st = step.to_double();
  EMBER_CHECK(st != 0, ValueError, "step must be nonzero");
  EMBER_CHECK(std::isfinite(s) && std::isfinite(e), ValueError, "unsupported range: ", s, " -> ", e);
  EMBER_CHECK((st > 0 && e >= s) || (st < 0 && e <= s), ValueError,
              "upper bound and larger bound inconsistent with step sign");
  double size = std::ceil((e - s) / st);
  // 2^63 is the first double past int64 (converting one is undefined behaviour).
  EMBER_CHECK(size >= 0 && size < 9223372036854775808.0, ValueError, "invalid size, possible overflow?");
  int64_t n = static_cast<int64_t>(size);
  Tensor out = allocate({n}, o);
  if (n > 0) {
    detail::KernelCall call{detail::OpKind::Arange, {detail::make_arg(out)}, {}, detail::kargs::Arange{start, step}};
    detail::launch(out.device(), call);
  }
  return leaf(out, options);
}

Tensor tensor(const TensorData& data, const TensorOptions& options) {
  IntList shape = shape_of(data);
  std::optional<DType> inferred;
  check_lists(data, shape, 0, inferred);
  // No numbers at all, e.g. {}: PyTorch gives a float tensor.
  DType dtype = options.has_dtype() ? options.dtype() : inferred.value_or(default_dtype());
  // Built on the host in the target dtype, then copied to the target device.
  Tensor host = detail::make_tensor(shape, dtype, Device(kCPU));
  switch (dtype) {
#define EMBER_CASE(D)                        \
  case D: {                                  \
    auto* out = host.data_ptr<dtype_t<D>>(); \
    flatten_into(data, out);                 \
    break;                                   \
  }
    // Macro calls without semicolons, which clang-format 14 does not settle on one layout.
    // clang-format off
    EMBER_CASE(DType::Bool) EMBER_CASE(DType::UInt8) EMBER_CASE(DType::Int8) EMBER_CASE(DType::Int16)
    EMBER_CASE(DType::Int32) EMBER_CASE(DType::Int64) EMBER_CASE(DType::Float16) EMBER_CASE(DType::BFloat16)
    EMBER_CASE(DType::Float32) EMBER_CASE(DType::Float64) EMBER_CASE(DType::Complex64) EMBER_CASE(DType::Complex128)
    // clang-format on
#undef EMBER_CASE
  }
  return leaf(host.to(TensorOptions(dtype).device(options.device()).pinned_memory(options.pinned_memory())), options);
}

Tensor empty_like(const Tensor& t, const TensorOptions& options) { return empty(t.sizes(), merge(options, t)); }
Tensor zeros_like(const Tensor& t, const TensorOptions& options) { return zeros(t.sizes(), merge(options, t)); }
Tensor ones_like(const Tensor& t, const TensorOptions& options) { return ones(t.sizes(), merge(options, t)); }
Tensor full_like(const Tensor& t, const Scalar& value, const TensorOptions& options) {
  return full(t.sizes(), value, merge(options, t));
}

Tensor Tensor::new_empty(const IntList& shape) const { return empty(shape, options().pinned_memory(false)); }
Tensor Tensor::new_zeros(const IntList& shape) const { return zeros(shape, options().pinned_memory(false)); }
Tensor Tensor::new_ones(const IntList& shape) const { return ones(shape, options().pinned_memory(false)); }
Tensor Tensor::new_full(const IntList& shape, const Scalar& value) const {
  return full(shape, value, options().pinned_memory(false));
}
Tensor Tensor::new_tensor(const TensorData& data) const { return tensor(data, options().pinned_memory(false)); }

}  // namespace ember
