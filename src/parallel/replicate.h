// Replicas of a module on several devices for DataParallel (PyTorch's replicate).
//
// Note [Binding replica parameters]
// A replica is a fresh module of the original's structure (ReplicaFactory). Its
// parameters and buffers are then rebound in place (TensorImpl::set_data, as Module::to
// does), so that the replica's own handles to them (Linear::weight) see the new values:
// a parameter takes the data and the history of its broadcast copy (a non-leaf whose
// gradient flows to the original), a buffer the data of its copy. On devices[0] both
// share storage with the original's, as PyTorch's replicas do.
#pragma once

#include <memory>
#include <vector>

#include "ember/nn/parallel/data_parallel.h"

namespace ember::detail::parallel {

/// A replica of `module` made by `factory`, its parameters and buffers not yet bound.
/// ValueError unless its parameters and buffers have the module's names and shapes and
/// none is the module's own tensor. Draws no random numbers as far as others can tell.
std::shared_ptr<ember::nn::Module> make_replica(const ember::nn::Module& module, const nn::ReplicaFactory& factory);

/// One replica per device, bound to `module`'s parameters and buffers (Note [Binding
/// replica parameters]), in the module's training modes. With grad mode off the
/// parameters are plain copies, recorded by no graph. `module` is on devices[0].
std::vector<std::shared_ptr<ember::nn::Module>> replicate(const ember::nn::Module& module,
                                                          const nn::ReplicaFactory& factory,
                                                          const std::vector<int>& devices);

}  // namespace ember::detail::parallel
