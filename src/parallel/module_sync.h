// What DistributedDataParallel does with a module's state across ranks before training:
// check that every rank has the same parameters, and copy rank 0's values to the others.
#pragma once

#include <string>
#include <vector>

#include "ember/tensor.h"

namespace ember::nn::parallel::detail {

/// Collective: every rank must call it with its parameters. Throws ValueError on every
/// rank when the ranks disagree on the number of parameters, or on the shape of one
/// (named by its index and `names`), as PyTorch's verify_params_across_processes.
void verify_params_across_processes(const std::vector<Tensor>& params, const std::vector<std::string>& names);

/// Collective: copies rank `src`'s `tensors` into every rank's, one broadcast per
/// (device, dtype) group through a flat buffer (PyTorch's _broadcast_coalesced).
void broadcast_coalesced(const std::vector<Tensor>& tensors, int src);

}  // namespace ember::nn::parallel::detail
