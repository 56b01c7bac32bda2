#include "autograd/autograd_meta.h"

#include "autograd/accumulate_grad.h"
#include "autograd/view_history.h"

namespace ember::autograd {

AutogradMeta& materialize_meta(const Tensor& t) {
  auto* impl = t.impl();
  if (impl->autograd_meta() == nullptr) impl->set_autograd_meta(std::make_unique<AutogradMeta>());
  return *static_cast<AutogradMeta*>(impl->autograd_meta());
}

Edge gradient_edge(const Tensor& t) {
  AutogradMeta* meta = meta_of(t);
  if (meta == nullptr) return {};
  if (meta->view_base_.defined()) detail::refresh_view(t, *meta);
  if (meta->grad_fn_) return {meta->grad_fn_, meta->output_nr_};
  if (!meta->requires_grad_) return {};
  std::lock_guard<std::mutex> lock(meta->mutex_);
  std::shared_ptr<Node> acc = meta->grad_accumulator_.lock();
  if (!acc) {
    acc = std::make_shared<AccumulateGrad>(t);
    meta->grad_accumulator_ = acc;
  }
  return {acc, 0};
}

Tensor alias_of(const Tensor& t) {
  const auto* impl = t.impl();
  return Tensor(std::make_shared<ember::detail::TensorImpl>(impl->storage(), impl->dtype(), impl->sizes(),
                                                            impl->strides(), impl->offset()));
}

}  // namespace ember::autograd
