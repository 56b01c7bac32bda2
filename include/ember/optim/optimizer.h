// optim::Optimizer: parameter groups, per-parameter state and the step/zero_grad cycle.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "ember/nn/state_dict.h"
#include "ember/tensor.h"

namespace ember::optim {

class LRScheduler;

/// The base of SGD, Adam and AdamW. step() gathers, per parameter group, the parameters
/// that have a gradient (others are skipped, as in PyTorch) and hands them to the
/// algorithm, which updates the whole group with one fused launch per device and dtype.
class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  /// One update of every parameter that has a gradient.
  void step();
  /// Clears every parameter's gradient: to an undefined tensor (set_to_none, the
  /// default, as PyTorch 2's), or to zeros.
  void zero_grad(bool set_to_none = true);

  size_t num_param_groups() const noexcept { return groups_.size(); }
  const std::vector<Tensor>& params(size_t group = 0) const;
  /// The learning rate of a group (what schedulers read and write). Every place a learning
  /// rate is set (options, add_param_group, set_lr, load_state_dict, initial_lr) refuses a
  /// non-finite one with a ValueError ("Invalid learning rate: inf") and changes nothing:
  /// PyTorch accepts inf, and one step then turns the parameters into inf or NaN.
  virtual double lr(size_t group = 0) const = 0;
  virtual void set_lr(double lr, size_t group = 0) = 0;
  /// PyTorch's param_group["initial_lr"]: the learning rate a group's schedule starts from,
  /// set by the first scheduler attached (OneCycleLR sets its own). state_dict() saves it as
  /// "param_groups.<g>.initial_lr" once set; load_state_dict() loads it when present.
  std::optional<double> initial_lr(size_t group = 0) const;
  void set_initial_lr(double lr, size_t group = 0);
  /// What OneCycleLR cycles with cycle_momentum: SGD's momentum, Adam's and AdamW's beta1
  /// (PyTorch's "momentum" or "betas" in optimizer.defaults). For an optimizer that has
  /// neither, has_momentum() is false and momentum()/set_momentum() are a ValueError.
  virtual bool has_momentum() const { return false; }
  /// Whether momentum() is beta1 (PyTorch's use_beta1).
  virtual bool momentum_is_beta1() const { return false; }
  virtual double momentum(size_t group = 0) const;
  virtual void set_momentum(double momentum, size_t group = 0);

  /// PyTorch's optimizer.state_dict(), flattened to names -> tensors that ember::save can
  /// write (Note [Optimizer state dicts] in src/optim/optimizer_state.cpp):
  ///   "state.<i>.step"            0-d float32, the parameter's step count (Adam, AdamW)
  ///   "state.<i>.<buffer>"        exp_avg and exp_avg_sq (Adam, AdamW), momentum_buffer (SGD)
  ///   "param_groups.<g>.<option>" the group's hyper-parameters: numbers as 0-d float64,
  ///                               flags as 0-d bool, Adam's betas as float64 [2]
  ///   "param_groups.<g>.initial_lr" 0-d float64, once a scheduler has set it
  ///   "param_groups.<g>.params"   int64 [n]: the indices <i> of the group's parameters
  /// <i> numbers the parameters across groups in order, as PyTorch does; a parameter that
  /// has no state yet has no "state." entries. The buffers are the optimizer's own tensors.
  nn::StateDict state_dict() const;
  /// Loads what state_dict() made (PyTorch's load_state_dict): every group's options and
  /// every parameter's state (copied to the parameter's device and dtype; a parameter with
  /// no entries starts afresh). Everything is checked first: a different number of groups,
  /// a group of another size, a missing or unexpected key, a state tensor of another shape
  /// or an invalid value is a ValueError and changes nothing.
  void load_state_dict(const nn::StateDict& state_dict);

 protected:
  Optimizer() = default;
  /// Adds a group; ValueError for an empty list, a parameter already in another group or a
  /// non-leaf that does not retain its grad ("can't optimize a non-leaf Tensor").
  void add_group(std::vector<Tensor> params);
  /// Updates params[i] of `group` from grads[i] (PyTorch's _step over one group).
  virtual void update(size_t group, const std::vector<Tensor>& params, const std::vector<Tensor>& grads) = 0;
  /// Checks a group's options (which options() may have changed); step() checks every group
  /// before it updates any, so a bad option changes no parameter.
  virtual void check_group(size_t /*group*/) const {}
  /// The check of set_lr: ValueError "Invalid learning rate: <lr>" unless `lr` is finite.
  static void check_finite_lr(double lr);

  /// Per-parameter state, kept across to() (keyed by the parameter's identity).
  struct ParamState {
    int64_t step = 0;
    Tensor device_step;           // capturable optimizers: the step count on the parameter's device
    std::vector<Tensor> buffers;  // the algorithm's state tensors, in its order
  };
  /// The state of `param`; state tensors are moved to its device and dtype if it moved.
  ParamState& state(const Tensor& param);
  /// capturable: makes `s.device_step` (at the first step) and advances it on the current
  /// stream; returns it. Called after `s.step` counted the step. Refuses a capture of the state's first step and, when
  /// not `capturable`, any capture (PyTorch's _cuda_graph_capture_health_check). `counts` false: only the capture check
  /// (a capturable SGD without momentum has no state).
  static const float* advance_device_step(ParamState& s, const Tensor& param, bool capturable, const char* name,
                                          bool counts = true);

  /// For state_dict(): the class name in error messages ("SGD", "Adam").
  virtual const char* type_name() const { return "Optimizer"; }
  /// The names of ParamState::buffers, in order (PyTorch's per-parameter state keys).
  virtual std::vector<std::string> buffer_names() const { return {}; }
  /// Whether ParamState::step is saved (PyTorch's Adam keeps "step"; its SGD does not).
  virtual bool saves_step() const { return false; }
  /// A group's hyper-parameters by PyTorch's param_group keys (without "params"); by
  /// default its learning rate alone.
  virtual nn::StateDict group_options(size_t group) const;
  /// Checks hyper-parameters read back (the keys and shapes of group_options(group),
  /// already checked by the caller) and, when `apply`, makes them the group's options.
  virtual void load_group_options(size_t group, const nn::StateDict& options, bool apply);

  /// Helpers for group_options and load_group_options.
  static Tensor number_tensor(double value);
  static Tensor flag_tensor(bool value);
  /// The value of options[key], a real number (ValueError naming the key otherwise).
  static double number_of(const nn::StateDict& options, const std::string& key);
  /// The value of options[key], 0 or 1 (ValueError naming the key otherwise).
  static bool flag_of(const nn::StateDict& options, const std::string& key);

 private:
  friend class LRScheduler;  // puts initial_lr_ back when a scheduler's initial step fails
  std::vector<std::vector<Tensor>> groups_;
  std::vector<std::optional<double>> initial_lr_;  // one per group
  std::unordered_map<const void*, ParamState> state_;
};

}  // namespace ember::optim
