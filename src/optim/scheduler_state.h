// The flat state dicts of the learning-rate schedulers: writing values as tensors and
// reading them back with every problem collected (Note [Scheduler state dicts]).
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "ember/nn/state_dict.h"
#include "ember/optim/lr_scheduler.h"

namespace ember::detail::optim {

/// Python's int, float and bool as 0-d int64, float64 and bool tensors; lists as 1-D
/// int64 or float64 tensors; strings as 1-D uint8 tensors of their bytes.
Tensor int_tensor(int64_t value);
Tensor float_tensor(double value);
Tensor bool_tensor(bool value);
Tensor ints_tensor(const std::vector<int64_t>& values);
Tensor floats_tensor(const std::vector<double>& values);
Tensor text_tensor(const std::string& value);

/// Whether every value is finite (what a learning rate must be).
bool all_finite(const std::vector<double>& values);

/// Reads a scheduler's state dict: each accessor marks its key used and returns its value,
/// or records the key as missing or the value as a problem and returns a placeholder.
class SchedulerStateReader {
 public:
  explicit SchedulerStateReader(const nn::StateDict& state_dict) : state_dict_(state_dict) {}

  int64_t integer(const std::string& key);
  double number(const std::string& key);
  bool flag(const std::string& key);
  /// A list of `size` numbers (any length when size < 0).
  std::vector<double> numbers(const std::string& key, int64_t size = -1);
  std::vector<int64_t> integers(const std::string& key);
  std::string text(const std::string& key);
  bool has(const std::string& key) const { return state_dict_.contains(key); }
  /// The entries under `prefix` (marked used), named without it.
  nn::StateDict entries_under(const std::string& prefix);
  /// Records `problem` unless `ok`.
  void check(bool ok, const std::string& problem);
  void add_problems(const std::string& context, const std::vector<std::string>& problems);

  /// "Missing key(s) ...", "Unexpected key(s) ..." and the problems, in that order.
  std::vector<std::string> errors() const;

 private:
  const Tensor* find(const std::string& key);
  const nn::StateDict& state_dict_;
  std::set<std::string> used_;
  std::vector<std::string> missing_, problems_;
};

}  // namespace ember::detail::optim
