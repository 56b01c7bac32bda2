// Views and in-place ops: how an in-place change of a view rewrites its base's history.
//
// Note [Views and in-place ops]
// A view remembers its base (the root one: a view of a view remembers the tensor that
// owns the storage), the storage version its grad_fn was made at and how it was made,
// its CreationMeta (`note_view`). An in-place op on such a view, when recorded, does what
// PyTorch's rebase_history does (`rebase_view`): the op's own node `fn` (over the view's
// old value and the op's other inputs) goes into a CopySlices node that becomes the
// base's grad_fn; CopySlices hands the base's gradient to the base's previous history
// with the view's region replaced by what `fn` computes for it, and the other inputs'
// gradients along fn's edges. The view's grad_fn is then made anew from the base: an
// AsStridedBackward0 of the view's geometry (`refresh_view`), as PyTorch does whenever
// the storage version moved since the view's grad_fn was made (an in-place change of the
// base or of another view included), so the view always sees the base's latest history.
//
// As PyTorch's handle_view_on_rebase, a view whose CreationMeta is not Default cannot take
// part in this: one made in no_grad mode (its requires_grad follows its base, but it has
// no grad_fn and is a leaf) or one of several views one op returned (or a view of one).
// An in-place op on it that would be recorded is refused before anything is written
// (`check_view_inplace`, "... is being modified inplace"), and once its storage version
// moved (it or its base changed in place in either mode) its history cannot be made anew:
// asking for it, as grad_fn() or any recorded op using it does, is refused too ("... its
// base or another view of its base has been modified inplace"), unless the view has no
// history to take (no grad_fn and a base that does not require grad). A view of such a
// view, made in grad mode, inherits its CreationMeta. Composite ops that make views
// inside NoGradGuard and record one node for their output (`record`, custom Functions)
// drop the no_grad view's base: to autograd, the output is not a view.
#pragma once

#include "autograd/autograd_meta.h"
#include "autograd/formula_node.h"

namespace ember::autograd::detail {

/// After `view` was made sharing `self`'s storage (ember::detail::Recorder::note_view).
void note_view(const Tensor& self, const Tensor& view, bool multi_output);

/// The error for an in-place change of a view whose CreationMeta is not Default: of the
/// view itself (`indirect` false) or of its base or another view of it (PyTorch's text).
[[noreturn]] void fail_view_inplace(const AutogradMeta& meta, bool indirect);

/// Before a recorded in-place op on `view`: refuses a view whose CreationMeta is not Default.
inline void check_view_inplace(const AutogradMeta& meta) {
  if (meta.creation_meta_ != CreationMeta::Default) fail_view_inplace(meta, /*indirect=*/false);
}

/// Whether `view`'s grad_fn must be made anew (its storage version moved and it has a
/// history to take); refuses one whose CreationMeta is not Default (see the note).
bool view_is_stale(const Tensor& view, const AutogradMeta& meta);

/// An op's output that the op made as a view inside NoGradGuard and that gets the op's
/// node: drops the view's base, so it is not a view to autograd (see the note).
void drop_no_grad_view(const Tensor& out);

/// A view's grad_fn made anew from its base when the storage version moved (see the note).
void refresh_view(const Tensor& view, AutogradMeta& meta);

/// Records the in-place op `formula` on the view `self` (already written): inputs[0] is
/// the view's old value, the others the op's other inputs; `read_versions` their versions
/// before the op wrote.
void rebase_view(Formula formula, const std::vector<Tensor>& inputs, Tensor& self, Attrs attrs,
                 const std::vector<uint32_t>& read_versions);

/// PyTorch's CopySlices: the base's node after an in-place op on one of its views.
class CopySlices final : public Node {
 public:
  CopySlices(const Tensor& base, const Tensor& view, std::shared_ptr<FormulaNode> fn);

  std::string name() const override { return "CopySlices"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override;
  /// Drops fn (its saved tensors and its edges, as PyTorch's CopySlices), so that freeing
  /// a chain of CopySlices nodes needs no recursion (Note [Releasing long graphs]).
  void release_variables() override { fn_.reset(); }

 private:
  InputInfo base_;
  InputInfo view_;
  std::shared_ptr<FormulaNode> fn_;
};

}  // namespace ember::autograd::detail
