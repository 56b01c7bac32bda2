// Deep copies of composite modules (clone() of modules whose children are members).
#pragma once

#include "ember/nn/module.h"

namespace ember::detail::nn {

/// Copies every parameter and buffer of `from` and of its descendants into the tensor of the
/// same name in `to` (a module of the same structure, freshly built): cloned values on their
/// devices and dtypes, swapped into `to`'s own tensors so its members stay bound, tied
/// parameters staying tied. Each module of `to` takes the training mode of its counterpart.
void copy_module_state(const ember::nn::Module& from, ember::nn::Module& to);

}  // namespace ember::detail::nn
