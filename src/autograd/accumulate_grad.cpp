#include "autograd/accumulate_grad.h"

#include <algorithm>
#include <numeric>

#include "ember/autograd.h"
#include "ember/errors.h"
#include "ember/factories.h"
#include "ember/ops.h"

namespace ember::autograd {

namespace {

// Dense and non-overlapping: the strides are a permutation of some contiguous strides.
bool dense_non_overlapping(const Tensor& t) {
  if (t.is_contiguous()) return true;
  std::vector<int64_t> order(t.dim());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return t.stride(a) < t.stride(b); });
  int64_t expected = 1;
  for (int64_t d : order) {
    if (t.size(d) == 1) continue;
    if (t.stride(d) != expected) return false;
    expected *= t.size(d);
  }
  return true;
}

bool obeys_layout(const Tensor& grad, const Tensor& like) {
  if (grad.sizes() != like.sizes()) return false;
  if (like.is_contiguous() || !dense_non_overlapping(like)) return grad.is_contiguous();
  for (int64_t d = 0; d < like.dim(); ++d) {
    if (like.size(d) != 1 && grad.stride(d) != like.stride(d)) return false;
  }
  return true;
}

}  // namespace

void check_assigned_grad(const Tensor& grad, const Tensor& variable) {
  EMBER_CHECK(grad.dtype() == variable.dtype() && grad.is_cuda() == variable.is_cuda(), TypeError,
              "assigned grad has data of a different type");
  EMBER_CHECK(grad.device() == variable.device(), Error, "assigned grad has data located on a different device");
  EMBER_CHECK(grad.sizes() == variable.sizes(), Error, "assigned grad has data of a different size");
}

Tensor clone_obeying_layout(const Tensor& grad, const Tensor& like) {
  if (like.is_contiguous() || !dense_non_overlapping(like)) return grad.clone();  // contiguous
  // A tensor with like's strides: allocate contiguous storage and view it with them.
  Tensor storage = empty({like.numel()}, TensorOptions(grad.dtype()).device(grad.device()));
  Tensor out = storage.as_strided(like.sizes(), like.strides(), 0);
  out.copy_(grad);
  return out;
}

AccumulateGrad::AccumulateGrad(Tensor variable) : Node({}, UINT64_MAX), variable_(std::move(variable)) {
  internals().inputs.push_back(InputMetadata::of(variable_));
}

Tensor AccumulateGrad::run_hooks(Tensor grad) const {
  AutogradMeta& meta = materialize_meta(variable_);
  std::vector<std::pair<unsigned, TensorHook>> hooks;
  {
    std::lock_guard<std::mutex> lock(meta.mutex_);
    hooks = meta.hooks_;
  }
  for (auto& [handle, hook] : hooks) {
    if (!grad.defined()) break;
    grad = hook_result(handle, grad, hook(grad));
  }
  return grad;
}

std::vector<Tensor> AccumulateGrad::apply(std::vector<Tensor>&& grads) {
  AutogradMeta& meta = materialize_meta(variable_);
  Tensor grad = run_hooks(std::move(grads.at(0)));
  if (!grad.defined()) return {};
  {
    std::lock_guard<std::mutex> lock(meta.mutex_);
    Tensor& slot = meta.grad_;
    if (slot.defined()) check_assigned_grad(slot, variable_);  // assigned through mutable_grad()
    if (!slot.defined()) {
      // The engine holds the only reference to a gradient it made: take it as it is.
      bool stealable = !is_grad_enabled() && grad.use_count() == 1 && grad.impl()->storage().use_count() == 1 &&
                       meta_of(grad) == nullptr && obeys_layout(grad, variable_);
      slot = stealable ? std::move(grad) : clone_obeying_layout(grad, variable_);
    } else if (!is_grad_enabled()) {
      slot.add_(grad);
    } else {
      slot = slot + grad;  // create_graph: the sum stays differentiable
    }
  }
  std::vector<std::function<void(Tensor&)>> post;
  {
    std::lock_guard<std::mutex> lock(meta.mutex_);
    post = meta.post_accumulate_hooks_;
  }
  for (auto& hook : post) hook(variable_);
  return {};
}

}  // namespace ember::autograd
