// The PyTorch name of each op kind, for error messages on every layer, and the checks of the op
// list's columns (kernels/op_list.h).
#pragma once

#include "kernels/kernel_call.h"

namespace ember::detail {

/// "add", "sum", "index_select", ...
const char* op_name(OpKind op) noexcept;

/// An internal error unless `call` carries the argument struct its row of the op list names
/// (Note [Typed kernel arguments]); detail::launch calls it for every launch.
void check_args(const KernelCall& call);

/// `op`'s argument struct (its row's Args column), default-constructed.
OpArgs default_args(OpKind op);

}  // namespace ember::detail
