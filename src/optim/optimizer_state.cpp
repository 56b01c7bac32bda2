// Optimizer::state_dict and load_state_dict.
//
// Note [Optimizer state dicts]
// PyTorch's optimizer.state_dict() is {"state": {i: {"step": .., "exp_avg": .., ..}},
// "param_groups": [{"lr": .., .., "params": [i, ..]}]}, the parameters numbered across
// the groups in order. ember flattens it into one ordered name -> tensor map, so that it
// goes through ember::save and ember::load (safetensors) as a module's state dict does:
// "state.<i>.<name>" for each parameter that has state, then "param_groups.<g>.<option>"
// and "param_groups.<g>.params" for each group. The step count is a 0-d float32 tensor, as
// in PyTorch 2.x (exact up to 2^24 steps).
//
// load_state_dict reads it back as PyTorch's does: the saved groups' parameter indices map,
// in order, onto this optimizer's parameters; the saved options replace each group's;
// state tensors are copied to their parameter's device and dtype (the step stays a count);
// a parameter with no saved state has none afterwards. Everything is checked and converted
// before anything is replaced, so an error leaves the optimizer as it was. Unlike PyTorch's,
// whose dict may hold anything, a key this optimizer would not write, a missing one and a
// state tensor of another shape than its parameter are errors. A group's "initial_lr" (set
// by a scheduler) is optional: saved once set, loaded when present, kept when absent, so
// checkpoints made without a scheduler still load.
#include <cmath>
#include <map>
#include <optional>
#include <set>

#include "core/tensor_impl.h"
#include "ember/errors.h"
#include "ember/factories.h"
#include "ember/optim/optimizer.h"
#include "ember/autograd.h"

namespace ember::optim {

using ember::detail::cat;

namespace {

// `key` = prefix + a decimal index (no leading zeros) + "." + rest: the index.
bool indexed_key(const std::string& key, const std::string& prefix, size_t& index) {
  if (key.compare(0, prefix.size(), prefix) != 0) return false;
  const size_t begin = prefix.size();
  size_t end = begin;
  while (end < key.size() && key[end] >= '0' && key[end] <= '9') ++end;
  const size_t digits = end - begin;
  if (digits == 0 || digits > 9 || end >= key.size() || key[end] != '.') return false;
  if (key[begin] == '0' && digits > 1) return false;
  index = std::stoul(key.substr(begin, digits));
  return true;
}

std::string quoted_list(const std::vector<std::string>& keys) {
  std::string out;
  for (size_t i = 0; i < keys.size(); ++i) out += (i ? ", \"" : "\"") + keys[i] + "\"";
  return out;
}

std::string shape_of(const Tensor& t) { return cat(ember::detail::IntListPrinter{t.sizes()}); }

}  // namespace

Tensor Optimizer::number_tensor(double value) { return full({}, value, TensorOptions(kFloat64)); }
Tensor Optimizer::flag_tensor(bool value) { return full({}, value, TensorOptions(kBool)); }

double Optimizer::number_of(const nn::StateDict& options, const std::string& key) {
  const Tensor& t = options.at(key);
  EMBER_CHECK(t.defined() && t.numel() == 1 && !is_complex(t.dtype()), ValueError, "option '", key,
              "' must be one real number");
  return t.item<double>();
}

bool Optimizer::flag_of(const nn::StateDict& options, const std::string& key) {
  const double value = number_of(options, key);
  EMBER_CHECK(value == 0 || value == 1, ValueError, "option '", key, "' must be a flag (0 or 1), got ", value);
  return value != 0;
}

nn::StateDict Optimizer::group_options(size_t group) const { return {{"lr", number_tensor(lr(group))}}; }

void Optimizer::load_group_options(size_t group, const nn::StateDict& options, bool apply) {
  const double value = number_of(options, "lr");
  check_finite_lr(value);
  if (apply) set_lr(value, group);
}

nn::StateDict Optimizer::state_dict() const {
  nn::StateDict out;
  const std::vector<std::string> names = buffer_names();
  size_t index = 0;
  for (const auto& group : groups_) {
    for (const Tensor& param : group) {
      auto found = state_.find(param.impl());
      if (found != state_.end() && !found->second.buffers.empty()) {
        const ParamState& s = found->second;
        const std::string prefix = cat("state.", index, ".");
        // capturable: the count on the device is the true one (replays advance only it).
        const double step = s.device_step.defined() ? s.device_step.item<double>() : static_cast<double>(s.step);
        if (saves_step()) out.insert(prefix + "step", full({}, step, TensorOptions(kFloat32)));
        for (size_t b = 0; b < names.size() && b < s.buffers.size(); ++b) out.insert(prefix + names[b], s.buffers[b]);
      }
      ++index;
    }
  }
  index = 0;
  for (size_t g = 0; g < groups_.size(); ++g) {
    const std::string prefix = cat("param_groups.", g, ".");
    for (const auto& [name, value] : group_options(g)) out.insert(prefix + name, value);
    if (initial_lr_[g]) out.insert(prefix + "initial_lr", number_tensor(*initial_lr_[g]));
    std::vector<int64_t> ids(groups_[g].size());
    for (int64_t& id : ids) id = static_cast<int64_t>(index++);
    out.insert(prefix + "params", tensor(ids, TensorOptions(kInt64)));
  }
  return out;
}

void Optimizer::load_state_dict(const nn::StateDict& state_dict) {
  std::set<size_t> saved_groups;
  for (const auto& item : state_dict) {
    size_t g = 0;
    if (indexed_key(item.first, "param_groups.", g)) saved_groups.insert(g);
  }
  EMBER_CHECK(saved_groups.size() == groups_.size(), ValueError,
              "loaded state dict has a different number of parameter groups");

  std::vector<std::string> missing, problems;
  std::set<std::string> used;
  // The saved index of each parameter (PyTorch's id_map), from the groups' "params".
  std::map<int64_t, const Tensor*> param_of;
  for (size_t g = 0; g < groups_.size(); ++g) {
    const std::string key = cat("param_groups.", g, ".params");
    const Tensor* ids = state_dict.find(key);
    if (ids == nullptr) {
      missing.push_back(key);
      continue;
    }
    used.insert(key);
    EMBER_CHECK(ids->defined() && ids->dim() == 1 && is_integral(ids->dtype()), ValueError, key,
                " must be a 1-D integer tensor of parameter indices");
    EMBER_CHECK(ids->size(0) == static_cast<int64_t>(groups_[g].size()), ValueError,
                "loaded state dict contains a parameter group that doesn't match the size of optimizer's group");
    const std::vector<int64_t> values = ids->to(kInt64).to_vector<int64_t>();
    for (size_t i = 0; i < values.size(); ++i) {
      EMBER_CHECK(values[i] >= 0 && param_of.emplace(values[i], &groups_[g][i]).second, ValueError, key,
                  " lists parameter index ", values[i], values[i] < 0 ? ", which is negative" : " more than once");
    }
  }

  // The groups' options: every key group_options() writes, of the same shape.
  std::vector<nn::StateDict> options(groups_.size());
  for (size_t g = 0; g < groups_.size(); ++g) {
    const std::string prefix = cat("param_groups.", g, ".");
    for (const auto& [name, current] : group_options(g)) {
      const Tensor* saved = state_dict.find(prefix + name);
      if (saved == nullptr) {
        missing.push_back(prefix + name);
        continue;
      }
      used.insert(prefix + name);
      if (!saved->defined() || saved->sizes() != current.sizes()) {
        problems.push_back(cat("size mismatch for ", prefix, name, ": copying a value with shape ",
                               saved->defined() ? shape_of(*saved) : "(undefined)", " from checkpoint, the shape in ",
                               "current optimizer is ", shape_of(current), "."));
      } else {
        options[g].insert(name, *saved);
      }
    }
  }

  // A scheduler's "initial_lr": loaded when saved (PyTorch keeps it in the group), else kept.
  std::vector<std::optional<double>> initial_lrs = initial_lr_;
  for (size_t g = 0; g < groups_.size(); ++g) {
    const std::string key = cat("param_groups.", g, ".initial_lr");
    const Tensor* saved = state_dict.find(key);
    if (saved == nullptr) continue;
    used.insert(key);
    const bool number = saved->defined() && saved->numel() == 1 && saved->dim() == 0 && !is_complex(saved->dtype());
    const double value = number ? saved->item<double>() : -1;
    if (!(value >= 0) || !std::isfinite(value)) {
      problems.push_back(cat("invalid value for ", key, ": expected one finite learning rate >= 0 (a 0-d tensor)"));
    } else {
      initial_lrs[g] = value;
    }
  }

  // Each parameter's state: all of its keys or none.
  std::vector<std::string> names;
  if (saves_step()) names.push_back("step");
  for (const std::string& name : buffer_names()) names.push_back(name);
  std::vector<std::pair<const Tensor*, std::vector<const Tensor*>>> loaded;  // (param, saved tensors by name)
  for (const auto& [index, param] : param_of) {
    const std::string prefix = cat("state.", index, ".");
    std::vector<const Tensor*> saved(names.size());
    size_t present = 0;
    for (size_t n = 0; n < names.size(); ++n) {
      saved[n] = state_dict.find(prefix + names[n]);
      if (saved[n] != nullptr) {
        ++present;
        used.insert(prefix + names[n]);
      }
    }
    if (present == 0) continue;
    if (present < names.size()) {
      for (size_t n = 0; n < names.size(); ++n) {
        if (saved[n] == nullptr) missing.push_back(prefix + names[n]);
      }
      continue;
    }
    bool ok = true;
    for (size_t n = 0; n < names.size(); ++n) {
      const Tensor& t = *saved[n];
      const std::string key = prefix + names[n];
      if (names[n] == "step") {
        const bool number = t.defined() && t.numel() == 1 && !is_complex(t.dtype());
        const double step = number ? t.item<double>() : -1;
        if (!(step >= 0 && step <= 9007199254740992.0 && step == std::floor(step))) {
          problems.push_back(cat("invalid value for ", key, ": expected a whole number of steps (one element, ",
                                 ">= 0)", number ? cat(", got ", step) : std::string()));
          ok = false;
        }
      } else if (!t.defined() || t.sizes() != param->sizes()) {
        problems.push_back(cat("size mismatch for ", key, ": copying a state tensor with shape ",
                               t.defined() ? shape_of(t) : "(undefined)",
                               " from checkpoint, the shape of its parameter in current optimizer is ",
                               shape_of(*param), "."));
        ok = false;
      } else if (!is_floating_point(t.dtype()) && !is_complex(t.dtype())) {
        problems.push_back(cat("invalid dtype for ", key, ": expected a floating point or complex state tensor, got ",
                               dtype_name(t.dtype())));
        ok = false;
      }
    }
    if (ok) loaded.emplace_back(param, std::move(saved));
  }

  std::vector<std::string> unexpected;
  for (const auto& item : state_dict) {
    if (!used.count(item.first)) unexpected.push_back(item.first);
  }
  std::vector<std::string> errors;
  if (!missing.empty()) errors.push_back("Missing key(s) in state_dict: " + quoted_list(missing) + ". ");
  if (!unexpected.empty()) errors.push_back("Unexpected key(s) in state_dict: " + quoted_list(unexpected) + ". ");
  errors.insert(errors.end(), problems.begin(), problems.end());
  if (errors.empty()) {
    for (size_t g = 0; g < groups_.size(); ++g) {
      try {
        load_group_options(g, options[g], /*apply=*/false);
      } catch (const ValueError& err) {
        errors.push_back(cat("parameter group ", g, ": ", err.what()));
      }
    }
  }
  if (!errors.empty()) {
    std::string message = cat("Error(s) in loading state_dict for ", type_name(), ":");
    for (const std::string& e : errors) message += "\n\t" + e;
    throw ValueError(message);
  }

  // Converted copies on each parameter's device and dtype, made before anything is replaced.
  std::unordered_map<const void*, ParamState> state;
  {
    NoGradGuard no_grad;
    for (const auto& [param, saved] : loaded) {
      ParamState& s = state[param->impl()];
      size_t n = 0;
      if (saves_step()) s.step = static_cast<int64_t>(saved[n++]->item<double>());
      for (; n < saved.size(); ++n) {
        s.buffers.push_back(saved[n]->detach().to(param->options(), /*non_blocking=*/false, /*copy=*/true).contiguous());
      }
    }
  }
  for (size_t g = 0; g < groups_.size(); ++g) load_group_options(g, options[g], /*apply=*/true);
  initial_lr_ = std::move(initial_lrs);
  state_ = std::move(state);
}

}  // namespace ember::optim
