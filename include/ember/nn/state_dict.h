// StateDict: the ordered name -> tensor map of a module's parameters and buffers.
#pragma once

#include "ember/nn/ordered_dict.h"
#include "ember/tensor.h"

namespace ember::nn {

/// Dotted names ("conv.weight") to tensors, in registration order (PyTorch's state_dict()).
using StateDict = OrderedDict<Tensor>;

}  // namespace ember::nn
