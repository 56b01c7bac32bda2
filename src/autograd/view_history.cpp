// Note [Views and in-place ops] (view_history.h): note_view, refresh_view, rebase_view and
// the CopySlices node.
#include "autograd/view_history.h"

#include "autograd/formulas_impl.h"
#include "ember/autograd.h"
#include "ember/factories.h"
#include "ember/ops.h"

namespace ember::autograd::detail {

namespace {

bool differentiable(const Tensor& t) { return is_floating_point(t.dtype()) || is_complex(t.dtype()); }

InputInfo geometry_of(const Tensor& t) { return {t.sizes(), t.strides(), t.storage_offset(), t.dtype(), t.device()}; }

// Elements a buffer needs to hold every element of `in` at offset 0.
int64_t extent_of(const InputInfo& in) {
  for (int64_t s : in.sizes) {
    if (s == 0) return 0;
  }
  return last_index(in.sizes, in.strides, 0) + 1;
}

}  // namespace

void note_view(const Tensor& self, const Tensor& view, bool multi_output) {
  if (!is_grad_enabled() || !differentiable(view)) return;
  AutogradMeta* meta = meta_of(self);
  AutogradMeta& view_meta = materialize_meta(view);
  view_meta.view_base_ = meta != nullptr && meta->view_base_.defined() ? meta->view_base_ : self;
  view_meta.view_version_ = view._version();
  view_meta.multi_output_view_ = multi_output;
}

void refresh_view(const Tensor& view, AutogradMeta& meta) {
  const uint32_t now = view._version();
  if (now == meta.view_version_) return;
  const Tensor& base = meta.view_base_;
  if (!meta.grad_fn_ && !base.requires_grad()) return;  // no history to take from the base
  std::lock_guard<std::mutex> lock(meta.mutex_);
  if (now == meta.view_version_) return;
  Attrs attrs;
  attrs.ints = view.sizes();
  attrs.ints2 = view.strides();
  attrs.dim = view.storage_offset();
  auto node = std::make_shared<FormulaNode>(Formula::AsStrided, std::vector<Edge>{gradient_edge(base)}, std::move(attrs));
  node->save({base}, {});
  node->internals().inputs.push_back(InputMetadata::of(view));
  meta.grad_fn_ = std::move(node);
  meta.output_nr_ = 0;
  meta.view_version_ = now;
}

void rebase_view(Formula formula, const std::vector<Tensor>& inputs, Tensor& self, Attrs attrs) {
  if (!differentiable(self)) return;
  AutogradMeta& view_meta = *meta_of(self);
  Tensor base = view_meta.view_base_;
  // fn: the op's node; its edge 0 is the base's history before the change.
  std::vector<Edge> edges;
  edges.reserve(inputs.size());
  edges.push_back(gradient_edge(base));
  for (size_t i = 1; i < inputs.size(); ++i) edges.push_back(inputs[i].defined() ? gradient_edge(inputs[i]) : Edge{});
  auto fn = std::make_shared<FormulaNode>(formula, std::move(edges), std::move(attrs));
  fn->save(inputs, {&self});
  fn->internals().inputs.push_back(InputMetadata::of(self));
  auto node = std::make_shared<CopySlices>(base, self, std::move(fn));
  AutogradMeta& base_meta = materialize_meta(base);
  base_meta.grad_fn_ = std::move(node);
  base_meta.output_nr_ = 0;
  view_meta.view_version_ = self._version() - 1;  // the view's history is made anew from the base
  refresh_view(self, view_meta);
}

CopySlices::CopySlices(const Tensor& base, const Tensor& view, std::shared_ptr<FormulaNode> fn)
    : Node(fn->next_edges()), base_(geometry_of(base)), view_(geometry_of(view)), fn_(std::move(fn)) {
  internals().inputs.push_back(InputMetadata::of(base));
}

std::vector<Tensor> CopySlices::apply(std::vector<Tensor>&& grads) {
  std::vector<Tensor> out(next_edges().size());
  const Tensor& grad = grads.at(0);
  if (!grad.defined()) return out;
  // The base's gradient, in the base's geometry, whose view region becomes fn's gradient
  // of the view's old value.
  Tensor result = empty({extent_of(base_)}, TensorOptions(grad.dtype()).device(grad.device()))
                      .as_strided(base_.sizes, base_.strides, 0);
  result.copy_(grad);
  Tensor slice = result.as_strided(view_.sizes, view_.strides, view_.offset - base_.offset);
  std::vector<Tensor> res = fn_->apply({slice.clone()});
  if (next_edges()[0].is_valid()) {
    if (res.at(0).defined()) {
      slice.copy_(res[0]);
    } else {
      slice.zero_();
    }
    out[0] = result;
  }
  for (size_t i = 1; i < res.size() && i < out.size(); ++i) out[i] = std::move(res[i]);
  return out;
}

}  // namespace ember::autograd::detail
