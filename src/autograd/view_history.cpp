// Note [Views and in-place ops] (view_history.h): note_view, refresh_view, rebase_view and
// the CopySlices node.
#include "autograd/view_history.h"

#include "autograd/formulas_impl.h"
#include "ember/autograd.h"
#include "ember/errors.h"
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
  if (!differentiable(view)) return;
  AutogradMeta* meta = meta_of(self);
  const bool of_view = meta != nullptr && meta->view_base_.defined();
  // PyTorch's propagate_creation_meta: a view made in grad mode by a single-output op
  // keeps what its base view was made as.
  CreationMeta made = !is_grad_enabled() ? CreationMeta::NoGradMode
                      : multi_output     ? CreationMeta::MultiOutputNode
                                         : CreationMeta::Default;
  if (made == CreationMeta::Default && of_view) made = meta->creation_meta_;
  AutogradMeta& view_meta = materialize_meta(view);
  view_meta.view_base_ = of_view ? meta->view_base_ : self;
  view_meta.view_version_ = view._version();
  view_meta.creation_meta_ = made;
}

void fail_view_inplace(const AutogradMeta& meta, bool indirect) {
  const char* modified = indirect ? "its base or another view of its base has been" : "is being";
  const Node* fn = meta.grad_fn_.get();
  using ember::detail::cat;
  std::string msg;
  if (meta.creation_meta_ == CreationMeta::NoGradMode || fn == nullptr) {
    msg = fn != nullptr
              ? cat("Output ", meta.output_nr_, " of ", fn->name(), " is a view of a view which was created in")
              : std::string("A view was created in");
    msg += cat(" no_grad mode and ", modified, " modified inplace with grad mode enabled.");
  } else {
    msg = cat("Output ", meta.output_nr_, " of ", fn->name(), " is a view and ", modified, " modified inplace.");
  }
  if (meta.creation_meta_ == CreationMeta::MultiOutputNode) {
    msg +=
        " This view is the output of a function that returns multiple views. Such functions do not allow the output "
        "views to be modified inplace. You should replace the inplace operation by an out-of-place one.";
  } else {
    msg +=
        " Given that this use case is ambiguous and error-prone, it is forbidden. You can clarify your code by moving "
        "both the view and the inplace either both inside the no_grad block (if you don't want the inplace to be "
        "tracked) or both outside (if you want the inplace to be tracked).";
  }
  ember::detail::fail<Error>(msg);
}

bool view_is_stale(const Tensor& view, const AutogradMeta& meta) {
  if (view._version() == meta.view_version_) return false;
  if (!meta.grad_fn_ && !meta.view_base_.requires_grad()) return false;  // no history to take from the base
  if (meta.creation_meta_ != CreationMeta::Default) fail_view_inplace(meta, /*indirect=*/true);
  return true;
}

void drop_no_grad_view(const Tensor& out) {
  AutogradMeta* meta = meta_of(out);
  if (meta == nullptr || meta->creation_meta_ != CreationMeta::NoGradMode) return;
  meta->view_base_ = Tensor();
  meta->creation_meta_ = CreationMeta::Default;
}

void refresh_view(const Tensor& view, AutogradMeta& meta) {
  if (!view_is_stale(view, meta)) return;
  const Tensor& base = meta.view_base_;
  std::lock_guard<std::mutex> lock(meta.mutex_);
  const uint32_t now = view._version();
  if (now == meta.view_version_) return;
  Attrs attrs(ember::detail::AsStridedArgs{view.sizes(), view.strides(), view.storage_offset()});
  auto node =
      std::make_shared<FormulaNode>(Formula::AsStrided, std::vector<Edge>{gradient_edge(base)}, std::move(attrs));
  node->save({base}, {});
  node->internals().inputs.push_back(InputMetadata::of(view));
  meta.grad_fn_ = std::move(node);
  meta.output_nr_ = 0;
  meta.view_version_ = now;
}

void rebase_view(Formula formula, const std::vector<Tensor>& inputs, Tensor& self, Attrs attrs,
                 const std::vector<uint32_t>& read_versions) {
  if (!differentiable(self)) return;
  AutogradMeta& view_meta = *meta_of(self);
  Tensor base = view_meta.view_base_;
  // fn: the op's node; its edge 0 is the base's history before the change.
  std::vector<Edge> edges;
  edges.reserve(inputs.size());
  edges.push_back(gradient_edge(base));
  for (size_t i = 1; i < inputs.size(); ++i) edges.push_back(inputs[i].defined() ? gradient_edge(inputs[i]) : Edge{});
  auto fn = std::make_shared<FormulaNode>(formula, std::move(edges), std::move(attrs));
  fn->save(inputs, {&self}, read_versions);
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
  if (fn_ == nullptr) fail_backward_twice();
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
