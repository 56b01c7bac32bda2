// op_entry: the one door of an op entry point (Note [Op entry]).
#pragma once

#include <utility>

#include "ops/autocast.h"
#include "ops/recording.h"

namespace ember::detail {

// Note [Op entry]
// An entry point made from the op list (the floating unary and binary families, Note
// [Declaring an op] in kernels/unary_ops.h) is one call:
//   op_entry(autocast_op_named("Exp"), Formula::Exp, compute, a)
// which applies the op's precision policy, from the op list's precision column
// (EMBER_AUTOCAST_OPS, Note [Autocast] in autocast.cpp): when autocast is on for the inputs'
// device type and the op has a row, compute runs on the cast inputs while the scope suspends
// autocast (the casts are recorded, as Tensor::to is); then records compute's result as one
// node of `formula` when should_record (Note [Recording ops]), compute running without
// recording. AutocastOp::kCount: the op is in no list, and autocast costs one thread-local
// load. The hand-written entry points of the other ops open their AutocastScope and call
// recorded() themselves.
template <typename F, typename... Ts>
Tensor op_entry(AutocastOp cast, Formula formula, F&& compute, const Ts&... inputs) {
  if (cast != AutocastOp::kCount && autocast_may_apply()) {
    if (AutocastScope ac{cast, {&inputs...}}) return op_entry(AutocastOp::kCount, formula, compute, ac.cast(inputs)...);
  }
  return recorded(formula, {&inputs...}, [&] { return compute(inputs...); });
}

}  // namespace ember::detail
