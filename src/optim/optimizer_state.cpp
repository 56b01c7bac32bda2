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
#include "ember/autograd.h"
#include "ember/errors.h"
#include "ember/factories.h"
#include "ember/optim/optimizer.h"

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

namespace {

// Reads a saved optimizer state dict against this optimizer's layout, part by part,
// collecting every missing key and problem before anything is replaced
// (Note [Optimizer state dicts]).
struct StateDictReader {
  const nn::StateDict& saved;
  const std::vector<std::vector<Tensor>>& groups;
  std::vector<std::string> missing, problems;
  std::set<std::string> used;

  const Tensor* take(const std::string& key) {
    const Tensor* t = saved.find(key);
    if (t != nullptr) used.insert(key);
    return t;
  }

  // The saved index of each parameter (PyTorch's id_map), from the groups' "params".
  std::map<int64_t, const Tensor*> parameter_indices() {
    std::map<int64_t, const Tensor*> param_of;
    for (size_t g = 0; g < groups.size(); ++g) {
      const std::string key = cat("param_groups.", g, ".params");
      const Tensor* ids = take(key);
      if (ids == nullptr) {
        missing.push_back(key);
        continue;
      }
      EMBER_CHECK(ids->defined() && ids->dim() == 1 && is_integral(ids->dtype()), ValueError, key,
                  " must be a 1-D integer tensor of parameter indices");
      EMBER_CHECK(ids->size(0) == static_cast<int64_t>(groups[g].size()), ValueError,
                  "loaded state dict contains a parameter group that doesn't match the size of optimizer's group");
      const std::vector<int64_t> values = ids->to(kInt64).to_vector<int64_t>();
      for (size_t i = 0; i < values.size(); ++i) {
        EMBER_CHECK(values[i] >= 0 && param_of.emplace(values[i], &groups[g][i]).second, ValueError, key,
                    " lists parameter index ", values[i], values[i] < 0 ? ", which is negative" : " more than once");
      }
    }
    return param_of;
  }

  // The groups' options: every key the optimizer writes (`current`), of the same shape.
  std::vector<nn::StateDict> group_options(const std::vector<nn::StateDict>& current) {
    std::vector<nn::StateDict> options(current.size());
    for (size_t g = 0; g < current.size(); ++g) {
      const std::string prefix = cat("param_groups.", g, ".");
      for (const auto& [name, now] : current[g]) {
        const Tensor* value = take(prefix + name);
        if (value == nullptr) {
          missing.push_back(prefix + name);
        } else if (!value->defined() || value->sizes() != now.sizes()) {
          problems.push_back(cat("size mismatch for ", prefix, name, ": copying a value with shape ",
                                 value->defined() ? shape_of(*value) : "(undefined)", " from checkpoint, the shape in ",
                                 "current optimizer is ", shape_of(now), "."));
        } else {
          options[g].insert(name, *value);
        }
      }
    }
    return options;
  }

  // A scheduler's "initial_lr": loaded when saved (PyTorch keeps it in the group), else kept.
  std::vector<std::optional<double>> initial_lrs(std::vector<std::optional<double>> out) {
    for (size_t g = 0; g < out.size(); ++g) {
      const std::string key = cat("param_groups.", g, ".initial_lr");
      const Tensor* value = take(key);
      if (value == nullptr) continue;
      const bool number = value->defined() && value->numel() == 1 && value->dim() == 0 && !is_complex(value->dtype());
      const double lr = number ? value->item<double>() : -1;
      if (!(lr >= 0) || !std::isfinite(lr)) {
        problems.push_back(cat("invalid value for ", key, ": expected one finite learning rate >= 0 (a 0-d tensor)"));
      } else {
        out[g] = lr;
      }
    }
    return out;
  }

  // A problem of one saved state tensor `t` (key `key`, named `name`) of `param`, if any.
  std::optional<std::string> state_problem(const Tensor& t, const std::string& key, const std::string& name,
                                           const Tensor& param) {
    if (name == "step") {
      const bool number = t.defined() && t.numel() == 1 && !is_complex(t.dtype());
      const double step = number ? t.item<double>() : -1;
      if (step >= 0 && step <= 9007199254740992.0 && step == std::floor(step)) return std::nullopt;
      return cat("invalid value for ", key, ": expected a whole number of steps (one element, >= 0)",
                 number ? cat(", got ", step) : std::string());
    }
    if (!t.defined() || t.sizes() != param.sizes()) {
      return cat("size mismatch for ", key, ": copying a state tensor with shape ",
                 t.defined() ? shape_of(t) : "(undefined)",
                 " from checkpoint, the shape of its parameter in current optimizer is ", shape_of(param), ".");
    }
    if (!is_floating_point(t.dtype()) && !is_complex(t.dtype())) {
      return cat("invalid dtype for ", key, ": expected a floating point or complex state tensor, got ",
                 dtype_name(t.dtype()));
    }
    return std::nullopt;
  }

  // Each parameter's state: all of its keys (`names`) or none. (param, saved tensors by name).
  std::vector<std::pair<const Tensor*, std::vector<const Tensor*>>> parameter_states(
      const std::map<int64_t, const Tensor*>& param_of, const std::vector<std::string>& names) {
    std::vector<std::pair<const Tensor*, std::vector<const Tensor*>>> loaded;
    for (const auto& [index, param] : param_of) {
      const std::string prefix = cat("state.", index, ".");
      std::vector<const Tensor*> tensors(names.size());
      size_t present = 0;
      for (size_t n = 0; n < names.size(); ++n) present += (tensors[n] = take(prefix + names[n])) != nullptr;
      if (present == 0) continue;
      if (present < names.size()) {
        for (size_t n = 0; n < names.size(); ++n) {
          if (tensors[n] == nullptr) missing.push_back(prefix + names[n]);
        }
        continue;
      }
      bool ok = true;
      for (size_t n = 0; n < names.size(); ++n) {
        if (auto problem = state_problem(*tensors[n], prefix + names[n], names[n], *param)) {
          problems.push_back(std::move(*problem));
          ok = false;
        }
      }
      if (ok) loaded.emplace_back(param, std::move(tensors));
    }
    return loaded;
  }

  // PyTorch's key lists first (missing, then unexpected), then the other problems.
  std::vector<std::string> errors() const {
    std::vector<std::string> unexpected;
    for (const auto& item : saved) {
      if (!used.count(item.first)) unexpected.push_back(item.first);
    }
    std::vector<std::string> out;
    if (!missing.empty()) out.push_back("Missing key(s) in state_dict: " + quoted_list(missing) + ". ");
    if (!unexpected.empty()) out.push_back("Unexpected key(s) in state_dict: " + quoted_list(unexpected) + ". ");
    out.insert(out.end(), problems.begin(), problems.end());
    return out;
  }
};

}  // namespace

void Optimizer::load_state_dict(const nn::StateDict& state_dict) {
  std::set<size_t> saved_groups;
  for (const auto& item : state_dict) {
    size_t g = 0;
    if (indexed_key(item.first, "param_groups.", g)) saved_groups.insert(g);
  }
  EMBER_CHECK(saved_groups.size() == groups_.size(), ValueError,
              "loaded state dict has a different number of parameter groups");

  StateDictReader reader{state_dict, groups_, {}, {}, {}};
  const std::map<int64_t, const Tensor*> param_of = reader.parameter_indices();
  std::vector<nn::StateDict> current(groups_.size());
  for (size_t g = 0; g < groups_.size(); ++g) current[g] = group_options(g);
  const std::vector<nn::StateDict> options = reader.group_options(current);
  std::vector<std::optional<double>> initial_lrs = reader.initial_lrs(initial_lr_);
  std::vector<std::string> names;
  if (saves_step()) names.push_back("step");
  for (const std::string& name : buffer_names()) names.push_back(name);
  const auto loaded = reader.parameter_states(param_of, names);

  std::vector<std::string> errors = reader.errors();
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
        s.buffers.push_back(
            saved[n]->detach().to(param->options(), /*non_blocking=*/false, /*copy=*/true).contiguous());
      }
    }
  }
  for (size_t g = 0; g < groups_.size(); ++g) load_group_options(g, options[g], /*apply=*/true);
  initial_lr_ = std::move(initial_lrs);
  state_ = std::move(state);
}

}  // namespace ember::optim
