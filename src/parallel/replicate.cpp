// Making and binding DataParallel's replicas (Note [Binding replica parameters]).
#include "parallel/replicate.h"

#include <string>
#include <typeinfo>

#include "autograd/autograd_meta.h"
#include "core/tensor_impl.h"
#include "ember/autograd.h"
#include "ember/errors.h"
#include "ops/fork_rng.h"
#include "parallel/comm.h"

namespace ember::detail::parallel {
namespace {

using ember::nn::Module;
using ember::nn::OrderedDict;

std::string names_of(const std::vector<std::string>& names) {
  std::string out = "[";
  for (size_t i = 0; i < names.size(); ++i) out += (i ? ", " : "") + names[i];
  return out + "]";
}

// ValueError unless `mine` and `theirs` hold the same names in the same order, with the
// same shapes, and share no tensor.
void check_same(const Module& module, const nn::ReplicaFactory& factory, const char* kind,
                const OrderedDict<Tensor>& mine, const OrderedDict<Tensor>& theirs) {
  const std::string prefix =
      cat("DataParallel: the replica of ", module.name(), " made by ", factory.how, " does not match the module: ");
  const char* hint = factory.how == "clone()" ? "" : " (override clone() to make replicas of it)";
  EMBER_CHECK(mine.keys() == theirs.keys(), ValueError, prefix, "the module has ", kind, "s ", names_of(mine.keys()),
              " but the replica has ", names_of(theirs.keys()), hint);
  for (size_t i = 0; i < mine.size(); ++i) {
    const auto& [name, original] = mine.item(i);
    const Tensor& copy = theirs.item(i).second;
    EMBER_CHECK(original.sizes() == copy.sizes(), ValueError, prefix, kind, " ", name, " has shape ",
                IntListPrinter{original.sizes()}, " in the module but ", IntListPrinter{copy.sizes()},
                " in the replica", hint);
    EMBER_CHECK(!original.is_same(copy), ValueError, prefix, kind, " ", name,
                " is the module's own tensor; a replica needs tensors of its own");
  }
}

// Rebinds `target` in place to `value`'s data and history (a grad_fn, or none).
void bind(const Tensor& target, const Tensor& value) {
  target.impl()->set_data(*value.impl());
  const autograd::AutogradMeta* source = autograd::meta_of(value);
  if (source == nullptr || source->grad_fn_ == nullptr) {
    target.impl()->set_autograd_meta(nullptr);
    return;
  }
  auto meta = std::make_unique<autograd::AutogradMeta>();
  meta->grad_fn_ = source->grad_fn_;
  meta->output_nr_ = source->output_nr_;
  target.impl()->set_autograd_meta(std::move(meta));
}

// Each module of the replica takes the training mode of the module at its position; in
// depth-first order, so a parent's train() never overrides a child set after it.
void copy_training_modes(const Module& module, Module& replica) {
  const auto originals = module.modules();
  const auto copies = replica.modules();
  for (size_t i = 0; i < originals.size(); ++i) {
    if (copies[i]->is_training() != originals[i]->is_training()) copies[i]->train(originals[i]->is_training());
  }
}

}  // namespace

std::shared_ptr<Module> make_replica(const Module& module, const nn::ReplicaFactory& factory) {
  std::shared_ptr<Module> replica;
  {
    ForkRng fork;  // the replica's initial values are overwritten: their draws must not count
    NoGradGuard no_grad;
    replica = factory.make(module);
  }
  EMBER_CHECK(replica != nullptr && replica.get() != &module, ValueError, "DataParallel: ", factory.how, " of ",
              module.name(), " returned ", replica ? "the module itself" : "no module",
              "; a replica must be a new module");
  const Module& made = *replica;
  EMBER_CHECK(typeid(made) == typeid(module), ValueError, "DataParallel: ", factory.how, " of ", module.name(),
              " made a ", replica->name(), "; override clone() in ", module.name(),
              " or give it a default constructor");
  check_same(module, factory, "parameter", module.named_parameters(), replica->named_parameters());
  check_same(module, factory, "buffer", module.named_buffers(), replica->named_buffers());
  const auto modules = module.named_modules().keys();
  const auto replica_modules = replica->named_modules().keys();
  EMBER_CHECK(modules == replica_modules, ValueError, "DataParallel: the replica of ", module.name(), " made by ",
              factory.how, " does not match the module: the module has submodules ", names_of(modules),
              " but the replica has ", names_of(replica_modules));
  return replica;
}

std::vector<std::shared_ptr<Module>> replicate(const Module& module, const nn::ReplicaFactory& factory,
                                               const std::vector<int>& devices) {
  std::vector<std::shared_ptr<Module>> replicas;
  replicas.reserve(devices.size());
  for (size_t i = 0; i < devices.size(); ++i) replicas.push_back(make_replica(module, factory));

  const std::vector<Tensor> parameters = module.parameters();
  const auto parameter_copies =
      is_grad_enabled() ? broadcast(parameters, devices) : broadcast_coalesced(parameters, devices);
  const auto buffer_copies = broadcast_coalesced(module.buffers(), devices);
  for (size_t d = 0; d < devices.size(); ++d) {
    Module& replica = *replicas[d];
    const std::vector<Tensor> replica_parameters = replica.parameters();
    for (size_t i = 0; i < replica_parameters.size(); ++i) bind(replica_parameters[i], parameter_copies[d][i]);
    const std::vector<Tensor> replica_buffers = replica.buffers();
    for (size_t i = 0; i < replica_buffers.size(); ++i) bind(replica_buffers[i], buffer_copies[d][i]);
    copy_training_modes(module, replica);
  }
  return replicas;
}

}  // namespace ember::detail::parallel
