// nn::Module: registries, traversal, modes, conversion and the repr.
#include "ember/nn/module.h"

#include <cxxabi.h>

#include <algorithm>
#include <cstdlib>
#include <ostream>
#include <typeinfo>
#include <unordered_set>

#include "core/tensor_impl.h"
#include "ember/autograd.h"
#include "ember/errors.h"
#include "nn/clear_grad.h"
#include "nn/copy_module.h"

namespace ember::nn {
namespace {

// "ember::nn::Linear" -> "Linear", "(anonymous namespace)::Net" -> "Net".
std::string demangled_class_name(const std::type_info& type) {
  int status = 0;
  char* raw = abi::__cxa_demangle(type.name(), nullptr, nullptr, &status);
  std::string name = status == 0 && raw ? raw : type.name();
  std::free(raw);
  const size_t template_start = name.find('<');
  const size_t last_scope = name.rfind("::", template_start);
  return last_scope == std::string::npos ? name : name.substr(last_scope + 2);
}

// PyTorch's _addindent: indents every line but the first.
std::string add_indent(const std::string& text, int spaces) {
  std::string out;
  for (char c : text) {
    out += c;
    if (c == '\n') out.append(static_cast<size_t>(spaces), ' ');
  }
  return out;
}

std::string quoted_list(const std::vector<std::string>& keys) {
  std::string out;
  for (size_t i = 0; i < keys.size(); ++i) out += (i ? ", \"" : "\"") + keys[i] + "\"";
  return out;
}

}  // namespace

Tensor Module::forward(const Tensor&) {
  detail::fail<Error>("Module [", name(), "] is missing the required \"forward\" function");
}

std::shared_ptr<Module> Module::clone() const {
  detail::fail<Error>("clone() is not implemented for ", name(),
                      "; the built-in modules implement it, a custom module may override it");
}

// ---- registration ------------------------------------------------------------------------

void Module::check_new_name(const std::string& name, const char* kind) const {
  EMBER_CHECK(!name.empty(), ValueError, kind, " name can't be empty string \"\"");
  // PyTorch's wording: only add_module names the offending name.
  EMBER_CHECK(name.find('.') == std::string::npos, ValueError, kind, " name can't contain \".\"",
              std::string(kind) == "module" ? ", got: " + name : std::string());
  const bool taken = (std::string(kind) != "parameter" && parameters_.contains(name)) ||
                     (std::string(kind) != "buffer" && buffers_.contains(name)) ||
                     (std::string(kind) != "module" && children_.contains(name));
  EMBER_CHECK(!taken, ValueError, "attribute '", name, "' already exists");
}

Tensor& Module::register_parameter(const std::string& name, Tensor tensor, bool requires_grad) {
  check_new_name(name, "parameter");
  // As PyTorch's register_parameter: a computed tensor would never receive a gradient.
  EMBER_CHECK(!tensor.defined() || tensor.is_leaf(), ValueError, "Cannot assign non-leaf Tensor to parameter '", name,
              "'. Model parameters must be created explicitly. To express '", name,
              "' as a function of another Tensor, compute the value in the forward() method.");
  if (tensor.defined()) tensor.requires_grad_(requires_grad);
  return parameters_.insert(name, std::move(tensor));
}

Tensor& Module::register_buffer(const std::string& name, Tensor tensor, bool persistent) {
  check_new_name(name, "buffer");
  std::erase(non_persistent_, name);
  if (!persistent) non_persistent_.push_back(name);
  return buffers_.insert(name, std::move(tensor));
}

void Module::register_module_impl(const std::string& name, std::shared_ptr<Module> module) {
  check_new_name(name, "module");
  EMBER_CHECK(module != nullptr, ValueError, "module '", name, "' is null");
  EMBER_CHECK(module.get() != this, ValueError, "a module cannot be registered as its own child ('", name, "')");
  children_.insert(name, std::move(module));
}

// ---- traversal -------------------------------------------------------------------------------

std::shared_ptr<Module> Module::self_ptr() const {
  // A module made with make_shared hands out owning pointers; one on the stack hands out a
  // non-owning alias of itself, valid while it lives.
  auto* self = const_cast<Module*>(this);
  if (auto owned = self->weak_from_this().lock()) return owned;
  return std::shared_ptr<Module>(std::shared_ptr<Module>(), self);
}

void Module::collect_named_modules(const std::string& prefix, const std::shared_ptr<Module>& self,
                                   OrderedDict<std::shared_ptr<Module>>& out, std::vector<const Module*>& seen) const {
  if (std::find(seen.begin(), seen.end(), this) != seen.end()) return;
  seen.push_back(this);
  out.insert(prefix, self);
  for (const auto& [name, child] : children_) {
    child->collect_named_modules(prefix.empty() ? name : prefix + "." + name, child, out, seen);
  }
}

OrderedDict<std::shared_ptr<Module>> Module::named_modules(const std::string& prefix) const {
  OrderedDict<std::shared_ptr<Module>> out;
  std::vector<const Module*> seen;
  collect_named_modules(prefix, self_ptr(), out, seen);
  return out;
}

std::vector<std::shared_ptr<Module>> Module::modules() const { return named_modules().values(); }
std::vector<std::shared_ptr<Module>> Module::children() const { return children_.values(); }
OrderedDict<std::shared_ptr<Module>> Module::named_children() const { return children_; }

OrderedDict<Tensor> Module::named_parameters(bool recurse) const {
  OrderedDict<Tensor> out;
  std::unordered_set<const detail::TensorImpl*> seen;
  auto modules = recurse ? named_modules() : OrderedDict<std::shared_ptr<Module>>{{"", self_ptr()}};
  for (const auto& [prefix, module] : modules) {
    for (const auto& [name, p] : module->parameters_) {
      if (!p.defined() || !seen.insert(p.impl()).second) continue;
      out.insert(prefix.empty() ? name : prefix + "." + name, p);
    }
  }
  return out;
}

std::vector<Tensor> Module::parameters(bool recurse) const { return named_parameters(recurse).values(); }

OrderedDict<Tensor> Module::named_buffers(bool recurse) const {
  OrderedDict<Tensor> out;
  std::unordered_set<const detail::TensorImpl*> seen;
  auto modules = recurse ? named_modules() : OrderedDict<std::shared_ptr<Module>>{{"", self_ptr()}};
  for (const auto& [prefix, module] : modules) {
    for (const auto& [name, b] : module->buffers_) {
      if (!b.defined() || !seen.insert(b.impl()).second) continue;
      out.insert(prefix.empty() ? name : prefix + "." + name, b);
    }
  }
  return out;
}

std::vector<Tensor> Module::buffers(bool recurse) const { return named_buffers(recurse).values(); }

Module& Module::apply(const std::function<void(Module&)>& fn) {
  for (const auto& [name, child] : children_) child->apply(fn);
  fn(*this);
  return *this;
}

// ---- modes, gradients, conversion --------------------------------------------------------------

Module& Module::train(bool on) {
  training_ = on;
  for (const auto& [name, child] : children_) child->train(on);
  return *this;
}

void Module::zero_grad(bool set_to_none) {
  for (Tensor& p : parameters()) detail::nn::clear_grad(p, set_to_none);
}

void Module::convert(const std::function<Tensor(const Tensor&)>& fn) {
  NoGradGuard no_grad;
  // Convert everything first, then swap: a failure (out of memory) changes nothing.
  std::vector<std::pair<Tensor, Tensor>> swaps;
  std::unordered_set<const detail::TensorImpl*> seen;
  for (const auto& module : modules()) {
    for (const OrderedDict<Tensor>* registry : {&module->parameters_, &module->buffers_}) {
      for (const auto& [name, t] : *registry) {
        if (!t.defined() || !seen.insert(t.impl()).second) continue;
        swaps.emplace_back(t, fn(t));
        Tensor grad = t.grad();
        if (grad.defined() && seen.insert(grad.impl()).second) swaps.emplace_back(grad, fn(grad));
      }
    }
  }
  for (auto& [target, converted] : swaps) target.impl()->set_data(*converted.impl());
}

Module& Module::to(Device device, bool non_blocking) {
  convert([&](const Tensor& t) { return t.to(device, non_blocking); });
  return *this;
}

Module& Module::to(DType dtype, bool non_blocking) {
  EMBER_CHECK(is_floating_point(dtype) || is_complex(dtype), TypeError,
              "nn.Module.to only accepts floating point or complex dtypes, but got desired dtype=", dtype);
  convert([&](const Tensor& t) {
    return is_floating_point(t.dtype()) || is_complex(t.dtype()) ? t.to(dtype, non_blocking) : t;
  });
  return *this;
}

Module& Module::to(Device device, DType dtype, bool non_blocking) {
  EMBER_CHECK(is_floating_point(dtype) || is_complex(dtype), TypeError,
              "nn.Module.to only accepts floating point or complex dtypes, but got desired dtype=", dtype);
  convert([&](const Tensor& t) {
    TensorOptions options = TensorOptions(device);
    if (is_floating_point(t.dtype()) || is_complex(t.dtype())) options = options.dtype(dtype);
    return t.to(options, non_blocking);
  });
  return *this;
}

// ---- state ---------------------------------------------------------------------------------------

void Module::for_each_state(const std::string& prefix,
                            const std::function<void(const std::string&, const Tensor&)>& fn) const {
  // Parameters, then persistent buffers, then each child under its name: PyTorch recurses
  // without de-duplication, so a module registered twice is saved under both names.
  for (const auto& [name, p] : parameters_) {
    if (p.defined()) fn(prefix + name, p);
  }
  for (const auto& [name, b] : buffers_) {
    if (b.defined() && std::find(non_persistent_.begin(), non_persistent_.end(), name) == non_persistent_.end())
      fn(prefix + name, b);
  }
  for (const auto& [name, child] : children_) child->for_each_state(prefix + name + ".", fn);
}

StateDict Module::state_dict() const {
  StateDict out;
  for_each_state("", [&](const std::string& key, const Tensor& t) { out.insert(key, t.detach()); });
  return out;
}

LoadStateDictResult Module::load_state_dict(const StateDict& state, bool strict) {
  LoadStateDictResult result;
  std::vector<std::string> mismatches;
  std::vector<std::pair<Tensor, Tensor>> copies;  // (target, converted source)
  std::unordered_set<std::string> expected;
  for_each_state("", [&](const std::string& key, const Tensor& target) {
    expected.insert(key);
    const Tensor* source = state.find(key);
    if (source == nullptr) {
      result.missing_keys.push_back(key);
    } else if (!source->defined()) {
      mismatches.push_back(
          detail::cat("While copying the parameter named \"", key, "\", expected a defined tensor from checkpoint"));
    } else if (source->sizes() != target.sizes()) {
      mismatches.push_back(detail::cat(
          "size mismatch for ", key, ": copying a param with shape ", detail::IntListPrinter{source->sizes()},
          " from checkpoint, the shape in current model is ", detail::IntListPrinter{target.sizes()}, "."));
    } else {
      copies.emplace_back(target, *source);
    }
  });
  for (const auto& [key, t] : state) {
    if (!expected.count(key)) result.unexpected_keys.push_back(key);
  }
  std::vector<std::string> errors;
  if (strict && !result.missing_keys.empty())
    errors.push_back("Missing key(s) in state_dict: " + quoted_list(result.missing_keys) + ". ");
  if (strict && !result.unexpected_keys.empty())
    errors.push_back("Unexpected key(s) in state_dict: " + quoted_list(result.unexpected_keys) + ". ");
  errors.insert(errors.end(), mismatches.begin(), mismatches.end());
  if (!errors.empty()) {
    std::string message = "Error(s) in loading state_dict for " + name() + ":";
    for (const std::string& e : errors) message += "\n\t" + e;
    throw ValueError(message);
  }
  // Converted copies first (dtype, device): nothing is written unless all succeed.
  NoGradGuard no_grad;
  for (auto& [target, source] : copies) source = source.to(target.options(), false, /*copy=*/true);
  for (auto& [target, source] : copies) target.copy_(source);
  return result;
}

void Module::copy_state_to(Module& copy) const {
  // Nested in a built-in clone(): the outermost one copies the whole tree.
  if (!detail::nn::clone_in_progress()) detail::nn::copy_module_state(*this, copy);
}

// ---- repr ------------------------------------------------------------------------------------------

std::string Module::name() const { return name_.empty() ? demangled_class_name(typeid(*this)) : name_; }

std::string Module::repr() const {
  // PyTorch's Module.__repr__.
  std::vector<std::string> extra_lines;
  const std::string extra = extra_repr();
  if (!extra.empty()) {
    size_t start = 0;
    for (size_t nl; (nl = extra.find('\n', start)) != std::string::npos; start = nl + 1)
      extra_lines.push_back(extra.substr(start, nl - start));
    extra_lines.push_back(extra.substr(start));
  }
  std::vector<std::string> lines = extra_lines;
  for (const auto& [key, child] : children_) lines.push_back("(" + key + "): " + add_indent(child->repr(), 2));
  std::string out = name() + "(";
  if (!lines.empty()) {
    if (extra_lines.size() == 1 && children_.empty()) {
      out += extra_lines[0];
    } else {
      out += "\n";
      for (const std::string& line : lines) out += "  " + line + "\n";
    }
  }
  return out + ")";
}

std::ostream& operator<<(std::ostream& out, const Module& module) { return out << module.repr(); }

}  // namespace ember::nn
