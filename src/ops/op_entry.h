// op_entry: the one door of an op entry point (Note [Op entry]).
#pragma once

#include <concepts>
#include <utility>
#include <vector>

#include "ops/autocast.h"
#include "ops/recording.h"

namespace ember::detail {

// Note [Op entry]
// A public op entry point (src/ops, src/ops/nn, nn::functional's grid_sample) that has a
// precision row or records a node goes through one door, op_entry, with its row as an OpEntry
// (`cast`, `formula`, `attrs`) and a `compute` that takes the tensor inputs:
//   op_entry({autocast_op_named("Exp"), Formula::Exp}, [](const Tensor& x) { ... }, a)
//   op_entry({AutocastOp::kAddmm, Formula::Addmm, AddmmArgs{beta, alpha}}, compute, bias, a, b)
//   op_entry({.formula = Formula::Gelu, .attrs = GeluArgs{tanh}}, compute, input)
//   op_entry({AutocastOp::kBmm}, compute, a, b)        // a composite: its inner ops record
//   op_entry({AutocastOp::kCat}, compute, tensors)     // a list of inputs (cat, stack)
// In that order it
//  1. applies the precision policy `cast` (the op list's precision column, EMBER_AUTOCAST_OPS,
//     Note [Autocast] in autocast.cpp): when autocast is on for the inputs' device type and the
//     op has a row there, an AutocastScope casts the inputs (the casts are recorded, as
//     Tensor::to is) and suspends autocast while the rest of the door runs on the cast inputs,
//     as the entry points' call of themselves with the cast inputs did before this door.
//     AutocastOp::kCount: the op is in no list; autocast then costs one thread-local load.
//  2. records compute's result as one node of `formula` with `attrs` when should_record (Note
//     [Recording ops]), compute running without recording (`recorded`, `recorded_list`).
//     Formula::kCount: no node of its own; compute runs as called (the ops it is made of, or
//     its own door, record).
// What depends on the inputs as the op sees them (checks of dtypes, promotion) lives in
// compute, which gets them cast or not. `attrs` are built by the caller before the door on
// every call, as they were before `recorded` (only moving them into a node waits for
// recording), so a door costs the non-recording path nothing it did not pay before. An entry
// whose attrs are built only when it records, or come from checks of the cast inputs (cumsum,
// logsumexp, scatter_add, cat, stack, convolution), opens a precision-only door whose compute
// opens the recording one.
// In-place entry points go through op_entry_inplace (`recorded_inplace`); they have no
// precision row, as PyTorch's autocast lists name out-of-place ops only.
// Not through the door, recording with `record` themselves: nodes made over prepared
// intermediates or with several outputs (nll_loss's elements, max_pool2d, avg_pool2d,
// batch_norm's statistics, layer_norm, sort/topk, split), softmax's (its attrs come from its
// checks), clamp with scalar bounds (attrs built only when recording), scatter_add_ (recorded
// as a copy_) and the view ops (a view is made and noted in grad mode).
struct OpEntry {
  AutocastOp cast = AutocastOp::kCount;  // the precision row; kCount: in no list
  Formula formula = Formula::kCount;     // the node recorded; kCount: none of its own
  Attrs attrs = {};                      // the node's attributes (node name, Args)
};

/// The entry point of an op over a fixed set of tensor inputs: `compute(inputs...)` under the
/// row's precision policy, recorded as its formula (Note [Op entry]).
template <typename F, std::same_as<Tensor>... Ts>
Tensor op_entry(OpEntry entry, F&& compute, const Ts&... inputs) {
  if (entry.cast != AutocastOp::kCount && autocast_may_apply()) {
    if (AutocastScope ac{entry.cast, {&inputs...}}) {
      entry.cast = AutocastOp::kCount;
      return op_entry(std::move(entry), compute, ac.cast(inputs)...);
    }
  }
  // Checked here (recorded checks again) so that the attrs move only when recording.
  if (entry.formula == Formula::kCount || !should_record({&inputs...})) return compute(inputs...);
  return recorded(
      entry.formula, {&inputs...}, [&] { return compute(inputs...); }, std::move(entry.attrs));
}

/// As above, over a list of inputs (cat, stack): `compute(inputs)`.
template <typename F>
Tensor op_entry(OpEntry entry, F&& compute, const std::vector<Tensor>& inputs) {
  if (entry.cast != AutocastOp::kCount && autocast_may_apply()) {
    if (AutocastScope ac{entry.cast, inputs}) {
      entry.cast = AutocastOp::kCount;
      return op_entry(std::move(entry), compute, ac.cast(inputs));
    }
  }
  if (entry.formula == Formula::kCount || !should_record(inputs)) return compute(inputs);
  return recorded_list(
      entry.formula, inputs, [&] { return compute(inputs); }, std::move(entry.attrs));
}

/// The entry point of an in-place op `self = op(self, other)` (other may be undefined):
/// `write()` recorded as `recorded_inplace` does. No precision row (Note [Op entry]).
/// `attrs`: none, or one argument the node's Attrs is made of (forwarded: made once, as before).
template <typename F, typename... A>
Tensor& op_entry_inplace(Formula formula, Tensor& self, const Tensor& other, F&& write, A&&... attrs) {
  return recorded_inplace(formula, self, other, std::forward<F>(write), std::forward<A>(attrs)...);
}

}  // namespace ember::detail
