#include "nn/autograd_shim.h"

#include "core/tensor_impl.h"

namespace ember::detail::nn {

// Until tensors carry autograd state these are identities; the autograd layer fills them in.
void set_requires_grad(Tensor&, bool) {}
void clear_grad(Tensor&, bool) {}
Tensor grad_of(const Tensor&) { return {}; }
Tensor detached(const Tensor& t) { return make_view(t, t.sizes(), t.strides(), t.storage_offset()); }
bool requires_grad_of(const Tensor&) { return false; }
NoGrad::NoGrad() : previous_(false) {}
NoGrad::~NoGrad() = default;

}  // namespace ember::detail::nn
