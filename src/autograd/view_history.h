// Views and in-place ops: how an in-place change of a view rewrites its base's history.
//
// Note [Views and in-place ops]
// A view made while grad mode is on remembers its base (the root one: a view of a view
// remembers the tensor that owns the storage) and the storage version its grad_fn was
// made at (`note_view`). An in-place op on such a view, when recorded, does what
// PyTorch's rebase_history does (`rebase_view`): the op's own node `fn` (over the view's
// old value and the op's other inputs) goes into a CopySlices node that becomes the
// base's grad_fn; CopySlices hands the base's gradient to the base's previous history
// with the view's region replaced by what `fn` computes for it, and the other inputs'
// gradients along fn's edges. The view's grad_fn is then made anew from the base: an
// AsStridedBackward0 of the view's geometry (`refresh_view`), as PyTorch does whenever
// the storage version moved since the view's grad_fn was made (an in-place change of the
// base or of another view included), so the view always sees the base's latest history.
// Not handled: views made under no_grad carry no base (PyTorch refuses an in-place change
// of them in grad mode; here it is recorded on the view alone).
#pragma once

#include "autograd/autograd_meta.h"
#include "autograd/formula_node.h"

namespace ember::autograd::detail {

/// A view's grad_fn made anew from its base when the storage version moved (see the note).
void refresh_view(const Tensor& view, AutogradMeta& meta);

/// Records the in-place op `formula` on the view `self` (already written): inputs[0] is
/// the view's old value, the others the op's other inputs.
void rebase_view(Formula formula, const std::vector<Tensor>& inputs, Tensor& self, Attrs attrs);

/// PyTorch's CopySlices: the base's node after an in-place op on one of its views.
class CopySlices final : public Node {
 public:
  CopySlices(const Tensor& base, const Tensor& view, std::shared_ptr<FormulaNode> fn);

  std::string name() const override { return "CopySlices"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override;
  void release_variables() override { fn_->release_variables(); }

 private:
  InputInfo base_;
  InputInfo view_;
  std::shared_ptr<FormulaNode> fn_;
};

}  // namespace ember::autograd::detail
