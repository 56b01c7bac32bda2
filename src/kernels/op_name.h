// The PyTorch name of each op kind, for error messages on every layer.
#pragma once

#include "kernels/kernel_call.h"

namespace ember::detail {

/// "add", "sum", "index_select", ...
const char* op_name(OpKind op) noexcept;

}  // namespace ember::detail
