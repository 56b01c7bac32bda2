// Tensor's autograd methods.
#include "autograd/autograd_meta.h"
#include "autograd/engine.h"
#include "autograd/view_history.h"
#include "ember/errors.h"

namespace ember {

using autograd::AutogradMeta;
using autograd::materialize_meta;
using autograd::meta_of;

namespace {
void check_defined(const Tensor& t) { EMBER_CHECK(t.defined(), ValueError, "Tensor is undefined"); }
}  // namespace

bool Tensor::requires_grad() const { return defined() && impl()->requires_grad(); }

Tensor& Tensor::requires_grad_(bool requires_grad) {
  check_defined(*this);
  AutogradMeta* meta = meta_of(*this);
  if (meta != nullptr && meta->grad_fn_) {
    EMBER_CHECK(requires_grad, Error,
                "you can only change requires_grad flags of leaf variables. If you want to use a computed variable in "
                "a subgraph that doesn't require differentiation use var_no_grad = var.detach().");
    return *this;
  }
  EMBER_CHECK(!requires_grad || is_floating_point(dtype()) || is_complex(dtype()), ValueError,
              "only Tensors of floating point and complex dtype can require gradients");
  if (meta == nullptr && !requires_grad) return *this;
  materialize_meta(*this).requires_grad_ = requires_grad;
  return *this;
}

bool Tensor::is_leaf() const { return grad_fn() == nullptr; }

const Tensor& Tensor::grad() const {
  static const Tensor undefined;
  AutogradMeta* meta = meta_of(*this);
  return meta == nullptr ? undefined : meta->grad_;
}

Tensor& Tensor::mutable_grad() const {
  check_defined(*this);
  return materialize_meta(*this).grad_;
}

std::shared_ptr<autograd::Node> Tensor::grad_fn() const {
  AutogradMeta* meta = meta_of(*this);
  if (meta == nullptr) return nullptr;
  if (meta->view_base_.defined()) autograd::detail::refresh_view(*this, *meta);
  return meta->grad_fn_;
}

Tensor Tensor::detach() const {
  check_defined(*this);
  return autograd::alias_of(*this);
}

void Tensor::retain_grad() const {
  check_defined(*this);
  EMBER_CHECK(requires_grad(), Error, "can't retain_grad on Tensor that has requires_grad=False");
  if (is_leaf()) return;  // leaves keep their gradient anyway
  AutogradMeta& meta = materialize_meta(*this);
  if (meta.retains_grad_) return;
  auto& in = meta.grad_fn_->internals();
  std::lock_guard<std::mutex> lock(in.mutex);
  in.retained[meta.output_nr_] = impl_ptr();
  meta.retains_grad_ = true;
}

bool Tensor::retains_grad() const {
  AutogradMeta* meta = meta_of(*this);
  return meta != nullptr && meta->retains_grad_;
}

unsigned Tensor::register_hook(std::function<Tensor(const Tensor&)> hook) const {
  check_defined(*this);
  EMBER_CHECK(requires_grad(), Error, "cannot register a hook on a tensor that doesn't require gradient");
  AutogradMeta& meta = materialize_meta(*this);
  (void)grad_fn();  // a view's history made anew first
  unsigned handle = autograd::next_hook_handle();
  if (meta.grad_fn_) {
    auto& in = meta.grad_fn_->internals();
    std::lock_guard<std::mutex> lock(in.mutex);
    in.tensor_hooks[meta.output_nr_].emplace_back(handle, std::move(hook));
  } else {
    std::lock_guard<std::mutex> lock(meta.mutex_);
    meta.hooks_.emplace_back(handle, std::move(hook));
  }
  return handle;
}

// As PyTorch's RemovableHandle.remove(): removing a hook that is gone is a no-op.
void Tensor::remove_hook(unsigned handle) const {
  AutogradMeta* meta = meta_of(*this);
  if (meta == nullptr) return;
  auto erase = [&](std::vector<std::pair<unsigned, autograd::TensorHook>>& hooks) {
    std::erase_if(hooks, [&](const auto& h) { return h.first == handle; });
  };
  if (meta->grad_fn_) {
    auto& in = meta->grad_fn_->internals();
    std::lock_guard<std::mutex> lock(in.mutex);
    auto it = in.tensor_hooks.find(meta->output_nr_);
    if (it != in.tensor_hooks.end()) erase(it->second);
  } else {
    std::lock_guard<std::mutex> lock(meta->mutex_);
    erase(meta->hooks_);
  }
}

void Tensor::register_post_accumulate_grad_hook(std::function<void(Tensor&)> hook) const {
  check_defined(*this);
  EMBER_CHECK(requires_grad(), Error, "cannot register a hook on a tensor that doesn't require gradient");
  EMBER_CHECK(is_leaf(), Error, "post accumulate grad hooks cannot be registered on non-leaf tensors");
  AutogradMeta& meta = materialize_meta(*this);
  std::lock_guard<std::mutex> lock(meta.mutex_);
  meta.post_accumulate_hooks_.push_back(std::move(hook));
}

void Tensor::backward(const Tensor& gradient, std::optional<bool> retain_graph, bool create_graph) const {
  autograd::backward({*this}, {gradient}, retain_graph, create_graph);
}

uint32_t Tensor::_version() const {
  check_defined(*this);
  return impl()->storage()->version();
}

uint32_t Tensor::output_nr() const {
  AutogradMeta* meta = meta_of(*this);
  return meta == nullptr ? 0 : meta->output_nr_;
}

}  // namespace ember
