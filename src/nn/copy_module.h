// Deep copies of modules: what every built-in module's clone() is made of.
//
// Note [Deep copies]
// clone() of a built-in module is Python's copy.deepcopy of it, in three steps:
//  1. The module's class builds a fresh copy with its constructor (a container clones its
//     children), inside a CloneScope. The outermost scope forks the random generators
//     (detail::ForkRng): the initial values drawn while building are overwritten in step 2,
//     and must not shift the numbers drawn after the clone.
//  2. The outermost scope then walks the original and the copy together (DeepCopy), registry
//     by registry and name by name. Each distinct tensor of the original is cloned once, into
//     the copy's tensor at the same place (set_data, so that the copy's members stay bound to
//     it); a tensor met again (tied weights) is replaced by that first copy; entries
//     registered after construction are added (children among them are cloned), and a child
//     shared in the original is shared in the copy. Each copied module takes its
//     counterpart's training mode and non-persistent buffer names.
//  3. Every module of the copy rebinds the members it keeps besides its registries
//     (Module::rebind_members) to what step 2 put in their place.
// Nested clone() calls (a container cloning its children) stop after step 1: the outermost
// clone() does steps 2 and 3 once over the whole tree, which is how a tie across siblings
// (an embedding tied to the output layer of a ModuleDict) survives the copy.
#pragma once

#include <memory>

#include "ember/autograd.h"
#include "ember/nn/module.h"
#include "ops/fork_rng.h"

namespace ember::detail::nn {

/// Marks a clone() in progress on the calling thread; the outermost scope forks the random
/// generators for its lifetime.
class CloneScope {
 public:
  CloneScope();
  ~CloneScope();
  CloneScope(const CloneScope&) = delete;
  CloneScope& operator=(const CloneScope&) = delete;
  bool outermost() const noexcept { return fork_ != nullptr; }

 private:
  std::unique_ptr<ForkRng> fork_;
};

/// Whether a clone() is in progress on the calling thread (an outer one will copy the state).
bool clone_in_progress() noexcept;

/// Steps 2 and 3 of Note [Deep copies]: makes `to`, built afresh with the constructor of
/// `from`'s class, a deep copy of `from` and of its descendants.
void copy_module_state(const ember::nn::Module& from, ember::nn::Module& to);

/// A built-in clone(): `make` builds the copy (step 1), then the outermost clone copies the
/// state of the whole tree.
template <typename Make>
std::shared_ptr<ember::nn::Module> clone_as(const ember::nn::Module& original, Make&& make) {
  CloneScope scope;
  std::shared_ptr<ember::nn::Module> copy;
  {
    NoGradGuard no_grad;
    copy = make();
  }
  if (scope.outermost()) copy_module_state(original, *copy);
  return copy;
}

}  // namespace ember::detail::nn
