// LRScheduler: attaching to an optimizer, the step cycle and the state dicts.
//
// Note [Scheduler state dicts]
// PyTorch's scheduler.state_dict() is the scheduler's __dict__ without the optimizer:
// {"step_size": 3, "gamma": 0.5, "base_lrs": [0.1], "last_epoch": 7, "_step_count": 8,
// "_last_lr": [0.025], ...}. ember flattens it as the optimizers' state dicts are, into one
// ordered name -> tensor map that ember::save writes (under a prefix such as "scheduler."):
// ints as 0-d int64, floats as 0-d float64, bools as 0-d bool, lists as 1-D int64/float64,
// strings ("min", "cos") as 1-D uint8 bytes; SequentialLR nests its schedulers' under
// "_schedulers.<i>.". The keys are PyTorch's names where PyTorch has the value in the
// scheduler; what PyTorch keeps in the param groups (OneCycleLR's max_lr, min_lr and
// momenta) is kept by the scheduler under the plural names. PyTorch's private flags with no
// bearing on the schedule (_get_lr_called_within_step, verbose) and LambdaLR's functions
// are not saved. load_state_dict, like PyTorch's __dict__.update, restores every value,
// hyper-parameters included; unlike it, it first checks that every key is there and
// expected, of the right kind and size, and in range, and reports all problems in one
// ValueError without changing anything.
#include "ember/optim/lr_scheduler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "ember/errors.h"
#include "ember/factories.h"
#include "nn/python_repr.h"
#include "optim/scheduler_state.h"

namespace ember::detail::optim {

Tensor int_tensor(int64_t value) { return full({}, value, TensorOptions(kInt64)); }
Tensor float_tensor(double value) { return full({}, value, TensorOptions(kFloat64)); }
Tensor bool_tensor(bool value) { return full({}, value, TensorOptions(kBool)); }
Tensor ints_tensor(const std::vector<int64_t>& values) {
  return values.empty() ? empty({0}, TensorOptions(kInt64)) : tensor(values, TensorOptions(kInt64));
}
Tensor floats_tensor(const std::vector<double>& values) {
  return values.empty() ? empty({0}, TensorOptions(kFloat64)) : tensor(values, TensorOptions(kFloat64));
}
Tensor text_tensor(const std::string& value) {
  return ints_tensor(std::vector<int64_t>(value.begin(), value.end())).to(kUInt8);
}

const Tensor* SchedulerStateReader::find(const std::string& key) {
  const Tensor* t = state_dict_.find(key);
  if (t == nullptr) {
    missing_.push_back(key);
    return nullptr;
  }
  used_.insert(key);
  return t;
}

int64_t SchedulerStateReader::integer(const std::string& key) {
  const Tensor* t = find(key);
  if (t == nullptr) return 0;
  if (!t->defined() || t->dim() != 0 || !is_integral(t->dtype()) || t->dtype() == kBool) {
    problems_.push_back(cat("invalid value for ", key, ": expected an integer (a 0-d integer tensor)"));
    return 0;
  }
  return t->to(kInt64).item<int64_t>();
}

double SchedulerStateReader::number(const std::string& key) {
  const Tensor* t = find(key);
  if (t == nullptr) return 0;
  if (!t->defined() || t->dim() != 0 || is_complex(t->dtype()) || t->dtype() == kBool) {
    problems_.push_back(cat("invalid value for ", key, ": expected a real number (a 0-d tensor)"));
    return 0;
  }
  return t->item<double>();
}

bool SchedulerStateReader::flag(const std::string& key) {
  const Tensor* t = find(key);
  if (t == nullptr) return false;
  if (!t->defined() || t->dim() != 0 || t->dtype() != kBool) {
    problems_.push_back(cat("invalid value for ", key, ": expected a flag (a 0-d bool tensor)"));
    return false;
  }
  return t->item<bool>();
}

std::vector<double> SchedulerStateReader::numbers(const std::string& key, int64_t size) {
  const Tensor* t = find(key);
  std::vector<double> placeholder(size < 0 ? 0 : static_cast<size_t>(size));
  if (t == nullptr) return placeholder;
  if (!t->defined() || t->dim() != 1 || is_complex(t->dtype()) || t->dtype() == kBool) {
    problems_.push_back(cat("invalid value for ", key, ": expected a list of real numbers (a 1-D tensor)"));
    return placeholder;
  }
  if (size >= 0 && t->size(0) != size) {
    problems_.push_back(
        cat("invalid value for ", key, ": expected ", size, " values (one per parameter group), got ", t->size(0)));
    return placeholder;
  }
  return t->to(kFloat64).to_vector<double>();
}

std::vector<int64_t> SchedulerStateReader::integers(const std::string& key) {
  const Tensor* t = find(key);
  if (t == nullptr) return {};
  if (!t->defined() || t->dim() != 1 || !is_integral(t->dtype()) || t->dtype() == kBool) {
    problems_.push_back(cat("invalid value for ", key, ": expected a list of integers (a 1-D integer tensor)"));
    return {};
  }
  return t->to(kInt64).to_vector<int64_t>();
}

std::string SchedulerStateReader::text(const std::string& key) {
  const Tensor* t = find(key);
  if (t == nullptr) return {};
  if (!t->defined() || t->dim() != 1 || t->dtype() != kUInt8) {
    problems_.push_back(cat("invalid value for ", key, ": expected a string (a 1-D uint8 tensor of its bytes)"));
    return {};
  }
  const std::vector<uint8_t> bytes = t->to_vector<uint8_t>();
  return std::string(bytes.begin(), bytes.end());
}

nn::StateDict SchedulerStateReader::entries_under(const std::string& prefix) {
  nn::StateDict out;
  for (const auto& [key, value] : state_dict_) {
    if (key.compare(0, prefix.size(), prefix) == 0) {
      used_.insert(key);
      out.insert(key.substr(prefix.size()), value);
    }
  }
  return out;
}

bool all_finite(const std::vector<double>& values) {
  return std::all_of(values.begin(), values.end(), [](double v) { return std::isfinite(v); });
}

void SchedulerStateReader::check(bool ok, const std::string& problem) {
  if (!ok) problems_.push_back(problem);
}

void SchedulerStateReader::add_problems(const std::string& context, const std::vector<std::string>& problems) {
  for (const std::string& p : problems) problems_.push_back(context + p);
}

std::vector<std::string> SchedulerStateReader::errors() const {
  auto quoted = [](const std::vector<std::string>& keys) {
    std::string out;
    for (size_t i = 0; i < keys.size(); ++i) out += (i ? ", \"" : "\"") + keys[i] + "\"";
    return out;
  };
  std::vector<std::string> unexpected;
  for (const auto& item : state_dict_) {
    if (!used_.count(item.first)) unexpected.push_back(item.first);
  }
  std::vector<std::string> out;
  if (!missing_.empty()) out.push_back("Missing key(s) in state_dict: " + quoted(missing_) + ". ");
  if (!unexpected.empty()) out.push_back("Unexpected key(s) in state_dict: " + quoted(unexpected) + ". ");
  out.insert(out.end(), problems_.begin(), problems_.end());
  return out;
}

}  // namespace ember::detail::optim

namespace ember::optim {

using ember::detail::cat;
using ember::detail::python_float;
using ember::detail::optim::all_finite;
using ember::detail::optim::SchedulerStateReader;

void LRScheduler::attach() {
  // PyTorch's __init__ with last_epoch = -1: group.setdefault("initial_lr", group["lr"]).
  // A refused initial step (a non-finite first lr) leaves the optimizer as it was.
  const std::vector<std::optional<double>> initial_lrs = optimizer_.initial_lr_;
  base_lrs_.clear();
  for (size_t g = 0; g < optimizer_.num_param_groups(); ++g) {
    if (!optimizer_.initial_lr(g)) optimizer_.set_initial_lr(optimizer_.lr(g), g);
    base_lrs_.push_back(*optimizer_.initial_lr(g));
  }
  try {
    initial_step();
  } catch (...) {
    optimizer_.initial_lr_ = initial_lrs;
    throw;
  }
}

void LRScheduler::initial_step() {
  const int64_t step_count = step_count_;
  step_count_ = 0;
  is_initial_ = true;
  try {
    step();
  } catch (...) {
    is_initial_ = false;
    step_count_ = step_count;
    throw;
  }
  is_initial_ = false;
}

void LRScheduler::step() {
  const int64_t step_count = step_count_;
  step_count_ = advanced(step_count_, "_step_count");
  try {
    update_lr(nullptr);
  } catch (...) {
    step_count_ = step_count;
    throw;
  }
}

void LRScheduler::update_lr(const int64_t* epoch) {
  // The values are computed and checked with last_epoch moved (get_lr reads it), and
  // last_epoch is put back if that fails, so a refused step changes nothing.
  const int64_t last_epoch = last_epoch_;
  std::vector<double> values;
  try {
    if (epoch == nullptr) {
      last_epoch_ = advanced(last_epoch_, "last_epoch");
      values = get_lr();
    } else {
      last_epoch_ = *epoch;
      values = has_closed_form() ? closed_form_lr() : get_lr();
    }
    check_finite(values, last_epoch_);
  } catch (...) {
    last_epoch_ = last_epoch;
    throw;
  }
  for (size_t g = 0; g < values.size() && g < optimizer_.num_param_groups(); ++g) optimizer_.set_lr(values[g], g);
  last_lr_ = group_lrs();
}

void LRScheduler::check_finite(const std::vector<double>& values, int64_t epoch, const char* what) const {
  for (size_t g = 0; g < values.size(); ++g) {
    EMBER_CHECK(std::isfinite(values[g]), ValueError, type_name(), ": the ", what, " of param group ", g,
                " would become ", python_float(values[g]), " at epoch ", epoch,
                " (a scheduler never sets a non-finite ", what, "; nothing was changed)");
  }
}

int64_t LRScheduler::advanced(int64_t counter, const char* name) const {
  EMBER_CHECK(counter < std::numeric_limits<int64_t>::max(), ValueError, type_name(), ": cannot step: ", name, " is ",
              counter, ", the largest int64");
  return counter + 1;
}

std::vector<double> LRScheduler::get_lr() { return group_lrs(); }

std::vector<double> LRScheduler::group_lrs() const {
  std::vector<double> out;
  for (size_t g = 0; g < optimizer_.num_param_groups(); ++g) out.push_back(optimizer_.lr(g));
  return out;
}

nn::StateDict LRScheduler::state_dict() const {
  nn::StateDict out;
  save_state(out);
  if (saves_base_state()) out.insert("base_lrs", ember::detail::optim::floats_tensor(base_lrs_));
  out.insert("last_epoch", ember::detail::optim::int_tensor(last_epoch_));
  if (saves_base_state()) out.insert("_step_count", ember::detail::optim::int_tensor(step_count_));
  out.insert("_last_lr", ember::detail::optim::floats_tensor(last_lr_));
  return out;
}

void LRScheduler::check_state(SchedulerStateReader& reader) {
  load_state(reader, /*apply=*/false);  // checks only
  const auto groups = static_cast<int64_t>(optimizer_.num_param_groups());
  if (saves_base_state()) {
    reader.check(all_finite(reader.numbers("base_lrs", groups)), "invalid value for base_lrs: expected finite numbers");
    reader.check(reader.integer("_step_count") >= 0, "invalid value for _step_count: expected >= 0");
  }
  reader.integer("last_epoch");
  reader.check(all_finite(reader.numbers("_last_lr", groups)), "invalid value for _last_lr: expected finite numbers");
}

std::vector<std::string> LRScheduler::state_problems(const nn::StateDict& state_dict) {
  SchedulerStateReader reader(state_dict);
  check_state(reader);
  return reader.errors();
}

void LRScheduler::load_state_dict(const nn::StateDict& state_dict) {
  const std::vector<std::string> errors = state_problems(state_dict);
  if (!errors.empty()) {
    std::string message = cat("Error(s) in loading state_dict for ", type_name(), ":");
    for (const std::string& e : errors) message += "\n\t" + e;
    throw ValueError(message);
  }
  SchedulerStateReader reader(state_dict);
  load_state(reader, /*apply=*/true);
  const auto groups = static_cast<int64_t>(optimizer_.num_param_groups());
  if (saves_base_state()) {
    base_lrs_ = reader.numbers("base_lrs", groups);
    step_count_ = reader.integer("_step_count");
  }
  last_epoch_ = reader.integer("last_epoch");
  last_lr_ = reader.numbers("_last_lr", groups);
}

}  // namespace ember::optim
