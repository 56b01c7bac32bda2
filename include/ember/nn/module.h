// nn::Module: the base of every layer and network (PyTorch's torch.nn.Module).
#pragma once

#include <functional>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include "ember/device.h"
#include "ember/dtype.h"
#include "ember/nn/ordered_dict.h"
#include "ember/nn/state_dict.h"
#include "ember/tensor.h"

namespace ember::detail::nn {
class DeepCopy;
}  // namespace ember::detail::nn

namespace ember::nn {

class Module;

/// What clone() hands Module::rebind_members: the copy's tensors and children that the deep
/// copy replaced (a parameter tied in the original becomes the one tensor it is tied to in
/// the copy too) and what replaced them. Calling it on a member updates it when it held a
/// replaced one and leaves it alone otherwise.
class MemberRemap {
 public:
  void operator()(Tensor& member) const;
  template <typename M>
  void operator()(std::shared_ptr<M>& member) const {
    if (auto replaced = std::dynamic_pointer_cast<M>(replacement(member.get()))) member = std::move(replaced);
  }

 private:
  friend class ember::detail::nn::DeepCopy;
  std::shared_ptr<Module> replacement(const Module* member) const;
  std::vector<std::pair<const void*, Tensor>> tensors_;  // (replaced impl, its replacement)
  std::vector<std::pair<const Module*, std::shared_ptr<Module>>> modules_;
};

/// What load_state_dict(strict = false) did not match (PyTorch's _IncompatibleKeys).
struct LoadStateDictResult {
  std::vector<std::string> missing_keys;
  std::vector<std::string> unexpected_keys;
};

/// A module owns ordered registries of parameters, buffers and child modules, as early
/// LibTorch's and PyTorch's. Subclasses register their parts in the constructor and
/// override forward(). Modules are shared (std::make_shared) and not copyable; clone()
/// makes a deep copy where a module implements it (every built-in module does).
///
/// Note [Module::to keeps identity]
/// to() converts each parameter and buffer (and a parameter's gradient) and swaps the
/// result into the same tensor (detail::TensorImpl::set_data), as `param.data = ...`
/// does in PyTorch: tensors handed out before, an optimizer's included, see the new
/// device and dtype.
class Module : public std::enable_shared_from_this<Module> {
 public:
  Module() = default;
  /// `name` is the name printed by the repr; by default the class name.
  explicit Module(std::string name) : name_(std::move(name)) {}
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  /// The computation; the base class throws ("Module [Net] is missing the required
  /// \"forward\" function").
  virtual Tensor forward(const Tensor& input);
  Tensor operator()(const Tensor& input) { return forward(input); }

  /// A deep copy (parameters and buffers cloned, same training mode), as Python's
  /// copy.deepcopy: a tensor or child shared in the original (tied weights) is shared in the
  /// copy, and parameters, buffers or children registered after construction are copied
  /// too. The built-in modules' clone() leaves the random generators as they were (the
  /// values drawn while building the copy are overwritten). The base class throws
  /// ember::Error; every built-in module implements it (Note [Deep copies] in
  /// src/nn/copy_module.h).
  virtual std::shared_ptr<Module> clone() const;

  // ---- registration ----------------------------------------------------------------
  /// Registers (or replaces) a parameter; sets its requires_grad. An undefined tensor
  /// registers an absent parameter (as `bias=None`), skipped by parameters() and
  /// state_dict(). Returns the stored tensor. A non-leaf (a tensor computed by a recorded
  /// op) is refused with ValueError, as PyTorch's register_parameter.
  Tensor& register_parameter(const std::string& name, Tensor tensor, bool requires_grad = true);
  /// Registers (or replaces) a buffer; a non-persistent buffer is left out of state_dict().
  Tensor& register_buffer(const std::string& name, Tensor tensor, bool persistent = true);
  /// Registers (or replaces) a child module and returns it.
  template <typename M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> module) {
    register_module_impl(name, module);
    return module;
  }

  // ---- access --------------------------------------------------------------------------
  /// Parameters of this module and (recurse) its descendants, each tensor once, in
  /// registration order.
  std::vector<Tensor> parameters(bool recurse = true) const;
  /// The same, with dotted names ("features.0.weight").
  OrderedDict<Tensor> named_parameters(bool recurse = true) const;
  std::vector<Tensor> buffers(bool recurse = true) const;
  OrderedDict<Tensor> named_buffers(bool recurse = true) const;
  /// Direct children.
  std::vector<std::shared_ptr<Module>> children() const;
  OrderedDict<std::shared_ptr<Module>> named_children() const;
  /// This module ("") and every descendant, each once, depth first in registration order.
  std::vector<std::shared_ptr<Module>> modules() const;
  OrderedDict<std::shared_ptr<Module>> named_modules(const std::string& prefix = "") const;
  /// Calls `fn` on every descendant, then on this module (PyTorch's apply).
  Module& apply(const std::function<void(Module&)>& fn);

  // ---- modes and gradients ---------------------------------------------------------------
  /// Sets training mode here and in every descendant.
  virtual Module& train(bool on = true);
  Module& eval() { return train(false); }
  bool is_training() const noexcept { return training_; }
  /// Clears every parameter's gradient: to an undefined tensor (set_to_none, the
  /// default), or to zeros.
  void zero_grad(bool set_to_none = true);

  // ---- conversion (Note [Module::to keeps identity]) ---------------------------------------
  Module& to(Device device, bool non_blocking = false);
  Module& to(const char* device, bool non_blocking = false) { return to(Device(device), non_blocking); }
  /// Casts floating point and complex parameters and buffers; other dtypes keep theirs.
  /// `dtype` must be floating point or complex (TypeError otherwise, as PyTorch's).
  Module& to(DType dtype, bool non_blocking = false);
  Module& to(Device device, DType dtype, bool non_blocking = false);

  // ---- state ---------------------------------------------------------------------------------
  /// Parameters and persistent buffers by dotted name, sharing storage with the module.
  StateDict state_dict() const;
  /// Copies `state` into the parameters and buffers. strict: missing or unexpected keys
  /// are errors. Any error (those, or a shape mismatch) is a ValueError with PyTorch's
  /// message ("Error(s) in loading state_dict for Net:\n\tMissing key(s) in state_dict:
  /// ...") and the module is left unchanged.
  LoadStateDictResult load_state_dict(const StateDict& state, bool strict = true);

  // ---- repr ------------------------------------------------------------------------------------
  /// The name in the repr: the one given to the constructor, else the class name.
  std::string name() const;
  /// The text inside the parentheses of a leaf's repr ("in_features=3, ...").
  virtual std::string extra_repr() const { return ""; }
  /// PyTorch's module repr.
  virtual std::string repr() const;

 protected:
  /// For clone() implementations: makes `copy`, a module of this class built afresh, a deep
  /// copy of this one and of its descendants (values, ties, registrations made after
  /// construction, training modes). Inside a built-in container's clone() it leaves that to
  /// the outermost clone(), which copies the whole tree at once.
  void copy_state_to(Module& copy) const;
  /// For clone(): a module that keeps members besides its registries (Linear::weight, a
  /// child held as std::shared_ptr<Linear>) passes each of them to `remap`, so that the copy's
  /// members follow what the deep copy put in its registries. The default has none.
  virtual void rebind_members(const MemberRemap& remap) { (void)remap; }

 private:
  friend class ember::detail::nn::DeepCopy;
  void register_module_impl(const std::string& name, std::shared_ptr<Module> module);
  void check_new_name(const std::string& name, const char* kind) const;
  void collect_named_modules(const std::string& prefix, const std::shared_ptr<Module>& self,
                             OrderedDict<std::shared_ptr<Module>>& out, std::vector<const Module*>& seen) const;
  void convert(const std::function<Tensor(const Tensor&)>& fn);
  void for_each_state(const std::string& prefix,
                      const std::function<void(const std::string&, const Tensor&)>& fn) const;
  std::shared_ptr<Module> self_ptr() const;

  std::string name_;
  bool training_ = true;
  OrderedDict<Tensor> parameters_;
  OrderedDict<Tensor> buffers_;
  std::vector<std::string> non_persistent_;
  OrderedDict<std::shared_ptr<Module>> children_;
};

std::ostream& operator<<(std::ostream& out, const Module& module);

}  // namespace ember::nn
