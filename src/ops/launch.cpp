#include "ops/launch.h"

#include "backends/cpu/cpu_kernels.h"
#include "ember/errors.h"
#include "kernels/op_name.h"
#include "runtime/context.h"
#include "sanitizer/sanitizer.h"

namespace ember::detail {

void launch(Device device, KernelCall& call) {
  check_args(call);  // the op list's Args column (Note [Typed kernel arguments])
  if (device.is_cpu()) {
    call.device = -1;
    if (sanitizer::enabled()) [[unlikely]]
      sanitizer::on_host_launch(call);  // pinned memory
    cpu::run(call);
    return;
  }
  call.device = device.index();
  StreamState* stream = current_stream_state(device.index());
  backend().launch(stream->native(), call);
}

// Operands read TensorImpl::data(), not data_ptr(): the launch is the access, checked
// where it runs (Note [Host accesses] in sanitizer/sanitizer.cpp).
TensorArg make_arg(const Tensor& t) { return TensorArg{t.impl()->data(), t.dtype(), t.sizes(), t.strides()}; }

void add_arg(OperandList& list, const Tensor& t) {
  TensorArg& arg = list.emplace_back();
  arg.data = t.impl()->data();
  arg.dtype = t.dtype();
  arg.sizes = t.sizes();
  arg.strides = t.strides();
}

void add_arg(OperandList& list, const Tensor& t, const IntList& shape) {
  if (t.sizes() != shape) {
    list.push_back(make_arg(t, shape));
    return;
  }
  add_arg(list, t);
  TensorArg& arg = list.back();
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 1) arg.strides[i] = 0;  // as make_arg(t, shape)
  }
}

TensorArg make_arg(const Tensor& t, const IntList& shape) {
  const IntList& sizes = t.sizes();
  const IntList& strides = t.strides();
  if (sizes == shape) {  // nothing to broadcast (the common case)
    TensorArg arg = make_arg(t);
    for (size_t i = 0; i < sizes.size(); ++i) {
      if (sizes[i] == 1) arg.strides[i] = 0;
    }
    return arg;
  }
  size_t n = shape.size(), offset = n - sizes.size();
  TensorArg arg{t.impl()->data(), t.dtype(), shape, DimList(n, 0)};
  for (size_t i = offset; i < n; ++i) {
    if (sizes[i - offset] != 1) arg.strides[i] = strides[i - offset];
  }
  return arg;
}

IntList broadcast_shapes(const IntList& a, const IntList& b) {
  size_t n = std::max(a.size(), b.size());
  IntList out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    EMBER_CHECK(da == db || da == 1 || db == 1, ValueError, "The size of tensor a (", da,
                ") must match the size of tensor b (", db, ") at non-singleton dimension ", i);
    out[i] = da == 1 ? db : da;
  }
  return out;
}

void check_same_device(const Tensor& a, const Tensor& b) {
  Device da = a.device(), db = b.device();
  EMBER_CHECK(da == db, DeviceError, "Expected all tensors to be on the same device, but found at least two devices, ",
              da, " and ", db, "!");
}

}  // namespace ember::detail
