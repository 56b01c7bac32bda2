// Tensor metadata: sizes, strides, dtype, device and the data pointer. The view ops are in
// src/ops/views.cpp (they record autograd nodes through the op layer's seam).
#include "core/host_access.h"
#include "core/tensor_impl.h"
#include "ember/errors.h"

namespace ember {

std::atomic<detail::HostAccessHook> detail::g_pinned_host_access_hook{nullptr};

using detail::wrap_dim;

namespace {
const detail::TensorImpl& checked(const std::shared_ptr<detail::TensorImpl>& impl) {
  EMBER_CHECK(impl != nullptr, ValueError, "Tensor is undefined");
  return *impl;
}
}  // namespace

Device Tensor::device() const { return checked(impl_).device(); }
DType Tensor::dtype() const { return checked(impl_).dtype(); }
const IntList& Tensor::sizes() const { return checked(impl_).sizes(); }
const IntList& Tensor::strides() const { return checked(impl_).strides(); }
namespace {
int64_t checked_dim(const Tensor& t, int64_t dim) {
  EMBER_CHECK(t.dim() > 0, IndexError, "dimension specified as ", dim, " but tensor has no dimensions");
  return wrap_dim(dim, t.dim());
}
}  // namespace

int64_t Tensor::size(int64_t dim) const { return sizes()[checked_dim(*this, dim)]; }
int64_t Tensor::stride(int64_t dim) const { return strides()[checked_dim(*this, dim)]; }
int64_t Tensor::dim() const { return checked(impl_).dim(); }
int64_t Tensor::numel() const { return checked(impl_).numel(); }
int64_t Tensor::storage_offset() const { return checked(impl_).offset(); }
size_t Tensor::element_size() const { return ember::element_size(dtype()); }
size_t Tensor::nbytes() const { return static_cast<size_t>(numel()) * element_size(); }
bool Tensor::is_cuda() const { return device().is_cuda(); }
bool Tensor::is_cpu() const { return device().is_cpu(); }
bool Tensor::is_pinned() const { return checked(impl_).storage()->pinned(); }
bool Tensor::is_contiguous() const { return checked(impl_).is_contiguous(); }
int Tensor::get_device() const { return is_cuda() ? device().index() : -1; }
TensorOptions Tensor::options() const { return TensorOptions(dtype()).device(device()).pinned_memory(is_pinned()); }
void* Tensor::data_ptr() const {
  const detail::TensorImpl& impl = checked(impl_);
  // The program may write through the pointer: a host write (Note [Host access hook]).
  detail::HostAccessHook hook = detail::g_pinned_host_access_hook.load(std::memory_order_relaxed);
  if (hook != nullptr && impl.storage()->pinned()) [[unlikely]]
    hook(impl, /*write=*/true, "data_ptr");
  return impl.data();
}

}  // namespace ember
