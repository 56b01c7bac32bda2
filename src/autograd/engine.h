// The engine: runs a backward pass over the graph.
#pragma once

#include <vector>

#include "ember/autograd.h"

namespace ember::autograd {

struct BackwardRequest {
  std::vector<Tensor> roots;
  std::vector<Tensor> root_grads;  // undefined entries: ones (scalar roots only)
  bool keep_graph = false;
  bool create_graph = false;
  /// Targets; empty: accumulate into every leaf's .grad.
  std::vector<Tensor> inputs;
  /// true: targets' gradients go into their .grad (backward); false: returned (grad).
  bool accumulate = true;
  bool allow_unused = false;
};

/// Runs one backward pass; returns the targets' gradients when !accumulate.
std::vector<Tensor> run_backward(const BackwardRequest& request);

}  // namespace ember::autograd
