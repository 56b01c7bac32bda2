// Copies between devices and dtypes: copy_, to, cuda, cpu, pin_memory, item, to_vector.
//
// Note [Copy semantics]
// Same-device copies are a Copy kernel on the device's current stream. Copies that
// cross devices move contiguous bytes through Backend::copy:
// - host -> device runs on the destination's current stream; with non_blocking from
//   pinned memory the host returns at once (the pinned block is recorded on the stream
//   so the pinned allocator defers its reuse); from pageable memory the backend returns
//   once the source is consumed; a blocking copy then waits for the stream, as PyTorch.
// - device -> host runs on the source's current stream and waits for it unless
//   non_blocking into pinned memory.
// - device -> device across devices runs on the source's current stream, ordered after
//   the destination stream's queued work and before its later work (events both ways).
#include <cstring>

#include "core/scalar_convert.h"
#include "core/tensor_impl.h"
#include "ember/cuda.h"
#include "ember/errors.h"
#include "ember/factories.h"
#include "ember/ops.h"
#include "ops/launch.h"
#include "ops/op_entry.h"
#include "ops/overlap.h"
#include "runtime/context.h"
#include "sanitizer/sanitizer.h"

namespace ember {

using detail::CopyKind;
using detail::KernelCall;
using detail::OpKind;

namespace {

// Same-device element-wise copy with dtype conversion and broadcasting of src.
void copy_same_device(const Tensor& dst, const Tensor& src) {
  KernelCall call{OpKind::Copy, {detail::make_arg(dst)}, {detail::make_arg(src, dst.sizes())}};
  detail::launch(dst.device(), call);
}

// `src` broadcast to `shape`, converted to `dtype`, contiguous, on its own device.
Tensor contiguous_as(const Tensor& src, const IntList& shape, DType dtype) {
  if (src.sizes() == shape && src.dtype() == dtype && src.is_contiguous()) return src;
  Tensor out = detail::empty_on(shape, dtype, src.device());
  copy_same_device(out, src);
  return out;
}

detail::StreamState* stream_of(const Tensor& t) { return detail::current_stream_state(t.device().index()); }

// The pinned allocator must not hand this block out again until the stream's copy is done.
void record_pinned_use(const Tensor& host, detail::StreamState* stream) {
  auto& storage = *host.impl()->storage();
  storage.allocator().record_stream(storage.data(), stream);
}

void copy_host_to_device(const Tensor& dst, const Tensor& src, bool non_blocking) {
  Tensor host = contiguous_as(src, dst.sizes(), dst.dtype());
  Tensor target = dst.is_contiguous() ? dst : detail::empty_on(dst.sizes(), dst.dtype(), dst.device());
  detail::StreamState* stream = stream_of(dst);
  bool pinned = host.is_pinned();
  detail::backend().copy(target.impl()->data(), host.impl()->data(), host.nbytes(), CopyKind::HostToDevice, pinned,
                         stream->native());
  if (pinned) record_pinned_use(host, stream);
  if (!target.is_same(dst)) copy_same_device(dst, target);
  if (!non_blocking) detail::backend().synchronize(stream->native());
}

void copy_device_to_host(const Tensor& dst, const Tensor& src, bool non_blocking) {
  Tensor device_side = contiguous_as(src, dst.sizes(), dst.dtype());
  bool direct = dst.is_contiguous();
  Tensor target = direct ? dst : detail::empty_on(dst.sizes(), dst.dtype(), Device(kCPU));
  detail::StreamState* stream = stream_of(src);
  bool pinned = target.is_pinned();
  detail::backend().copy(target.impl()->data(), device_side.impl()->data(), device_side.nbytes(),
                         CopyKind::DeviceToHost, pinned, stream->native());
  if (pinned) record_pinned_use(target, stream);
  if (!non_blocking || !pinned || !direct) detail::backend().synchronize(stream->native());
  if (!direct) copy_same_device(dst, target);
}

// A backend event that lives for one scope.
class ScopedEvent {
 public:
  explicit ScopedEvent(int device) : event_(detail::backend().create_event(device, false)) {}
  ~ScopedEvent() { detail::backend().destroy_event(event_); }
  ScopedEvent(const ScopedEvent&) = delete;
  ScopedEvent& operator=(const ScopedEvent&) = delete;
  detail::BackendEvent* get() const noexcept { return event_; }

 private:
  detail::BackendEvent* event_;
};

void copy_device_to_device(const Tensor& dst, const Tensor& src) {
  detail::Backend& backend = detail::backend();
  Tensor source = contiguous_as(src, dst.sizes(), dst.dtype());
  Tensor target = dst.is_contiguous() ? dst : detail::empty_on(dst.sizes(), dst.dtype(), dst.device());
  auto* src_stream = stream_of(source)->native();
  auto* dst_stream = stream_of(target)->native();
  // Order the copy after the destination's queued work and before its later work.
  ScopedEvent dst_ready(dst.device().index()), copied(src.device().index());
  backend.record(dst_ready.get(), dst_stream);
  backend.wait(src_stream, dst_ready.get());
  backend.copy(target.impl()->data(), source.impl()->data(), source.nbytes(), CopyKind::DeviceToDevice, false,
               src_stream);
  backend.record(copied.get(), src_stream);
  backend.wait(dst_stream, copied.get());
  // A temporary `source` was allocated on the source stream, which ran the copy: the
  // allocator only reuses it for later work on that stream.
  if (!target.is_same(dst)) copy_same_device(dst, target);
}

}  // namespace

namespace {
void copy_values(Tensor& self, const Tensor& src, bool non_blocking);

// The stream the backward of a copy from `src` to `target` writes src's gradient on:
// the source side's current stream, when the copy crosses to another cuda device.
std::optional<cuda::Stream> source_stream(const Tensor& src, Device target) {
  if (!src.is_cuda() || src.device() == target) return std::nullopt;
  return cuda::current_stream(src.get_device());
}
}  // namespace

Tensor& Tensor::copy_(const Tensor& src, bool non_blocking) {
  EMBER_CHECK(defined() && src.defined(), ValueError, "copy_(): both tensors must be defined");
  ember::detail::CopyArgs attrs;
  if (ember::detail::should_record(*this, src)) attrs.source_stream = source_stream(src, device());
  return ember::detail::op_entry_inplace(
      ember::detail::Formula::CopyInPlace, *this, src, [&] { copy_values(*this, src, non_blocking); },
      std::move(attrs));
}

namespace {
void copy_values(Tensor& self, const Tensor& src, bool non_blocking) {
  IntList shape = detail::broadcast_shapes(self.sizes(), src.sizes());
  EMBER_CHECK(shape == self.sizes(), ValueError, "output with shape ", detail::IntListPrinter{self.sizes()},
              " doesn't match the broadcast shape ", detail::IntListPrinter{shape});
  if (self.numel() == 0) return;
  Device to = self.device(), from = src.device();
  if (to == from) {
    if (detail::same_view(self, src)) return;
    detail::check_no_internal_overlap(self);
    detail::check_no_partial_overlap(self, src);
    copy_same_device(self, src);
  } else if (from.is_cpu()) {
    copy_host_to_device(self, src, non_blocking);
  } else if (to.is_cpu()) {
    copy_device_to_host(self, src, non_blocking);
  } else {
    copy_device_to_device(self, src);
  }
}
}  // namespace

Tensor Tensor::to(const TensorOptions& options, bool non_blocking, bool copy) const {
  Device target = options.has_device() ? detail::resolve_device(options.device()) : device();
  DType dtype = options.has_dtype() ? options.dtype() : this->dtype();
  // Like PyTorch, a non-blocking copy from a cuda tensor to the cpu lands in pinned
  // memory, so that it can stay asynchronous.
  bool pinned = target.is_cpu() && (options.pinned_memory() || (non_blocking && is_cuda()));
  if (!copy && target == device() && dtype == this->dtype() && (!pinned || is_pinned())) return *this;
  ember::detail::CopyArgs attrs;
  bool same_kind = target == device() && dtype == this->dtype();
  if (ember::detail::should_record(*this)) attrs.source_stream = source_stream(*this, target);
  return ember::detail::op_entry(
      {.formula = same_kind ? ember::detail::Formula::Clone : ember::detail::Formula::ToCopy,
       .attrs = std::move(attrs)},
      [&](const Tensor& self) {
        Tensor out = detail::make_tensor(self.sizes(), dtype, target, pinned);
        out.copy_(self, non_blocking);
        return out;
      },
      *this);
}
Tensor Tensor::to(Device device, bool non_blocking, bool copy) const {
  return to(TensorOptions(device), non_blocking, copy);
}
Tensor Tensor::to(DType dtype, bool non_blocking, bool copy) const {
  return to(TensorOptions(dtype), non_blocking, copy);
}
Tensor Tensor::cuda() const { return to(Device(kCUDA)); }
Tensor Tensor::cuda(int index, bool non_blocking) const { return to(Device(kCUDA, index), non_blocking); }
Tensor Tensor::cuda(Device device, bool non_blocking) const {
  EMBER_CHECK(device.is_cuda(), ValueError, "Expected a cuda device, but got: ", device);
  return to(device, non_blocking);
}
Tensor Tensor::cpu() const { return to(Device(kCPU)); }
Tensor Tensor::clone() const { return to(TensorOptions(), false, true); }
Tensor Tensor::contiguous() const { return is_contiguous() ? *this : clone(); }

Tensor Tensor::pin_memory() const {
  EMBER_CHECK(is_cpu(), ValueError, "cannot pin '", device(), "' memory: only dense CPU tensors can be pinned");
  if (is_pinned()) return *this;
  Tensor out = detail::make_tensor(sizes(), dtype(), Device(kCPU), /*pinned=*/true);
  out.copy_(*this);
  return out;
}

void Tensor::record_stream(const cuda::Stream& stream) const {
  EMBER_CHECK(is_cuda(), ValueError, "record_stream expects a cuda tensor, but got a tensor on ", device());
  EMBER_CHECK(stream.state() != nullptr, ValueError, "record_stream: invalid stream");
  auto& storage = *impl()->storage();
  storage.allocator().record_stream(storage.data(), stream.state());
}

template <typename T>
std::vector<T> Tensor::to_vector() const {
  Tensor host = to(TensorOptions(dtype_of<T>()).device(Device(kCPU))).contiguous();
  if (detail::sanitizer::enabled() && host.is_pinned()) [[unlikely]]
    detail::sanitizer::on_host_access(detail::make_arg(host), /*write=*/false, "to_vector", "self");
  const T* data = static_cast<const T*>(host.impl()->data());
  return std::vector<T>(data, data + host.numel());
}

namespace {

// The single element, read in a type that holds every value of the tensor's dtype.
template <typename T>
T only_element(const Tensor& t) {
  EMBER_CHECK(t.numel() == 1, ValueError, "a Tensor with ", t.numel(), " elements cannot be converted to Scalar");
  return t.to_vector<T>()[0];
}

}  // namespace

template <typename T>
T Tensor::item() const {
  // As LibTorch's item<T>() (item().to<T>()): a value T cannot hold is refused, not wrapped.
  return detail::checked_to<T>(item());
}

Scalar Tensor::item() const {
  DType d = dtype();
  if (d == kBool) return Scalar(only_element<bool>(*this));
  if (is_integral(d)) return Scalar(only_element<int64_t>(*this));
  if (is_complex(d)) return Scalar(only_element<std::complex<double>>(*this));
  return Scalar(only_element<double>(*this));
}

#define EMBER_INSTANTIATE(T)          \
  template T Tensor::item<T>() const; \
  template std::vector<T> Tensor::to_vector<T>() const;
EMBER_INSTANTIATE(bool)
EMBER_INSTANTIATE(uint8_t)
EMBER_INSTANTIATE(int8_t)
EMBER_INSTANTIATE(int16_t)
EMBER_INSTANTIATE(int32_t)
EMBER_INSTANTIATE(int64_t)
EMBER_INSTANTIATE(Half)
EMBER_INSTANTIATE(BFloat16)
EMBER_INSTANTIATE(float)
EMBER_INSTANTIATE(double)
EMBER_INSTANTIATE(std::complex<float>)
EMBER_INSTANTIATE(std::complex<double>)
#undef EMBER_INSTANTIATE

}  // namespace ember
