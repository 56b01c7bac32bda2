// Containers: nn::Sequential, nn::ModuleList and nn::ModuleDict.
#pragma once

#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "ember/nn/module.h"

namespace ember::nn {

/// Runs its modules in order, each on the previous one's output; children are named
/// "0", "1", ... (or by the names given).
class Sequential : public Module {
 public:
  Sequential() = default;
  Sequential(std::initializer_list<std::shared_ptr<Module>> modules);
  explicit Sequential(const std::vector<std::shared_ptr<Module>>& modules);
  explicit Sequential(const OrderedDict<std::shared_ptr<Module>>& named_modules);

  Tensor forward(const Tensor& input) override;
  std::shared_ptr<Module> clone() const override;
  /// Appends a module named by its position.
  void push_back(std::shared_ptr<Module> module);
  /// The module at `index` (negative counts from the end); IndexError out of range.
  std::shared_ptr<Module> operator[](int64_t index) const;
  size_t size() const noexcept { return modules_.size(); }
  bool empty() const noexcept { return modules_.empty(); }

 protected:
  void rebind_members(const MemberRemap& remap) override;

 private:
  std::vector<std::shared_ptr<Module>> modules_;
};

/// Holds modules by position; it has no forward() of its own. Its repr folds runs of
/// identical modules as PyTorch 2's does ("(0-2): 3 x Linear(...)").
class ModuleList : public Module {
 public:
  ModuleList() = default;
  ModuleList(std::initializer_list<std::shared_ptr<Module>> modules);
  explicit ModuleList(const std::vector<std::shared_ptr<Module>>& modules);

  std::shared_ptr<Module> clone() const override;
  std::string repr() const override;
  void push_back(std::shared_ptr<Module> module);
  void extend(const std::vector<std::shared_ptr<Module>>& modules);
  std::shared_ptr<Module> operator[](int64_t index) const;
  size_t size() const noexcept { return modules_.size(); }
  bool empty() const noexcept { return modules_.empty(); }
  std::vector<std::shared_ptr<Module>>::const_iterator begin() const { return modules_.begin(); }
  std::vector<std::shared_ptr<Module>>::const_iterator end() const { return modules_.end(); }

 protected:
  void rebind_members(const MemberRemap& remap) override;

 private:
  std::vector<std::shared_ptr<Module>> modules_;
};

/// Holds modules by name, in insertion order, as torch.nn.ModuleDict: each is a child under
/// its key, so parameter names nest as PyTorch's ("blocks.attn.weight"). It has no forward().
class ModuleDict : public Module {
 public:
  ModuleDict() = default;
  explicit ModuleDict(const OrderedDict<std::shared_ptr<Module>>& modules);

  std::shared_ptr<Module> clone() const override;
  /// Adds `module` under `name`, or replaces the module of that name in place (keeping its
  /// position), as `dict[name] = module`; the name follows register_module's rules.
  std::shared_ptr<Module> insert(const std::string& name, std::shared_ptr<Module> module);
  /// The module under `name`; IndexError if there is none.
  std::shared_ptr<Module> operator[](const std::string& name) const;
  bool contains(const std::string& name) const noexcept { return modules_.contains(name); }
  /// Names in insertion order.
  std::vector<std::string> keys() const { return modules_.keys(); }
  std::vector<std::shared_ptr<Module>> values() const { return modules_.values(); }
  size_t size() const noexcept { return modules_.size(); }
  bool empty() const noexcept { return modules_.empty(); }
  OrderedDict<std::shared_ptr<Module>>::const_iterator begin() const { return modules_.begin(); }
  OrderedDict<std::shared_ptr<Module>>::const_iterator end() const { return modules_.end(); }

 protected:
  void rebind_members(const MemberRemap& remap) override;

 private:
  OrderedDict<std::shared_ptr<Module>> modules_;
};

}  // namespace ember::nn
