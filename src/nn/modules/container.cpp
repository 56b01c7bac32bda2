#include "ember/nn/modules/container.h"

#include <string>
#include "nn/copy_module.h"

namespace ember::nn {
namespace {

std::shared_ptr<Module> at_index(const std::vector<std::shared_ptr<Module>>& modules, int64_t index,
                                 const char* container) {
  const int64_t n = static_cast<int64_t>(modules.size());
  EMBER_CHECK(index >= -n && index < n, IndexError, "index ", index, " is out of range for a ", container, " of ", n,
              " modules");
  return modules[static_cast<size_t>(index < 0 ? index + n : index)];
}

std::string indented(const std::string& text) {
  std::string out;
  for (char c : text) {
    out += c;
    if (c == '\n') out += "  ";
  }
  return out;
}

}  // namespace

// ---- Sequential ----------------------------------------------------------------------------

Sequential::Sequential(std::initializer_list<std::shared_ptr<Module>> modules) {
  for (const auto& m : modules) push_back(m);
}

Sequential::Sequential(const std::vector<std::shared_ptr<Module>>& modules) {
  for (const auto& m : modules) push_back(m);
}

Sequential::Sequential(const OrderedDict<std::shared_ptr<Module>>& named_modules) {
  for (const auto& [name, m] : named_modules) modules_.push_back(register_module(name, m));
}

void Sequential::push_back(std::shared_ptr<Module> module) {
  modules_.push_back(register_module(std::to_string(modules_.size()), std::move(module)));
}

std::shared_ptr<Module> Sequential::operator[](int64_t index) const { return at_index(modules_, index, "Sequential"); }

Tensor Sequential::forward(const Tensor& input) {
  Tensor x = input;
  for (const auto& m : modules_) x = m->forward(x);
  return x;
}

std::shared_ptr<Module> Sequential::clone() const {
  return detail::nn::clone_as(*this, [&] {
    OrderedDict<std::shared_ptr<Module>> copies;
    for (const auto& [name, child] : named_children()) copies.insert(name, child->clone());
    return std::make_shared<Sequential>(copies);
  });
}

// ---- ModuleList ------------------------------------------------------------------------------

ModuleList::ModuleList(std::initializer_list<std::shared_ptr<Module>> modules) {
  for (const auto& m : modules) push_back(m);
}

ModuleList::ModuleList(const std::vector<std::shared_ptr<Module>>& modules) { extend(modules); }

void ModuleList::push_back(std::shared_ptr<Module> module) {
  modules_.push_back(register_module(std::to_string(modules_.size()), std::move(module)));
}

void ModuleList::extend(const std::vector<std::shared_ptr<Module>>& modules) {
  for (const auto& m : modules) push_back(m);
}

std::shared_ptr<Module> ModuleList::operator[](int64_t index) const { return at_index(modules_, index, "ModuleList"); }

std::shared_ptr<Module> ModuleList::clone() const {
  return detail::nn::clone_as(*this, [&] {
    auto copy = std::make_shared<ModuleList>();
    for (const auto& m : modules_) copy->push_back(m->clone());
    return copy;
  });
}

std::string ModuleList::repr() const {
  // PyTorch 2's ModuleList.__repr__: consecutive identical reprs fold into "(i-j): n x ...".
  if (modules_.empty()) return name() + "()";
  std::string out = name() + "(\n";
  size_t start = 0;
  while (start < modules_.size()) {
    const std::string block = modules_[start]->repr();
    size_t end = start;
    while (end + 1 < modules_.size() && modules_[end + 1]->repr() == block) ++end;
    std::string line = start == end ? "(" + std::to_string(start) + "): " + block
                                    : "(" + std::to_string(start) + "-" + std::to_string(end) +
                                          "): " + std::to_string(end - start + 1) + " x " + block;
    out += "  " + indented(line) + "\n";
    start = end + 1;
  }
  return out + ")";
}

// ---- ModuleDict ------------------------------------------------------------------------------

ModuleDict::ModuleDict(const OrderedDict<std::shared_ptr<Module>>& modules) {
  for (const auto& [name, m] : modules) insert(name, m);
}

std::shared_ptr<Module> ModuleDict::insert(const std::string& name, std::shared_ptr<Module> module) {
  register_module(name, module);  // checks the name and the module first
  return modules_.insert(name, std::move(module));
}

std::shared_ptr<Module> ModuleDict::operator[](const std::string& name) const {
  const std::shared_ptr<Module>* found = modules_.find(name);
  EMBER_CHECK(found != nullptr, IndexError, "ModuleDict has no module '", name, "' (keys: ", modules_.size(), ")");
  return *found;
}

std::shared_ptr<Module> ModuleDict::clone() const {
  return detail::nn::clone_as(*this, [&] {
    auto copy = std::make_shared<ModuleDict>();
    for (const auto& [name, m] : modules_) copy->insert(name, m->clone());
    return copy;
  });
}

void Sequential::rebind_members(const MemberRemap& remap) {
  for (auto& m : modules_) remap(m);
}

void ModuleList::rebind_members(const MemberRemap& remap) {
  for (auto& m : modules_) remap(m);
}

void ModuleDict::rebind_members(const MemberRemap& remap) {
  for (auto& [name, m] : modules_) remap(m);
}

}  // namespace ember::nn
