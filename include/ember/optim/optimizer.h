// optim::Optimizer: parameter groups, per-parameter state and the step/zero_grad cycle.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "ember/tensor.h"

namespace ember::optim {

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
  /// The learning rate of a group (what schedulers read and write).
  virtual double lr(size_t group = 0) const = 0;
  virtual void set_lr(double lr, size_t group = 0) = 0;

 protected:
  Optimizer() = default;
  /// Adds a group; ValueError for an empty list or a parameter already in another group.
  void add_group(std::vector<Tensor> params);
  /// Updates params[i] of `group` from grads[i] (PyTorch's _step over one group).
  virtual void update(size_t group, const std::vector<Tensor>& params, const std::vector<Tensor>& grads) = 0;

  /// Per-parameter state, kept across to() (keyed by the parameter's identity).
  struct ParamState {
    int64_t step = 0;
    std::vector<Tensor> buffers;  // the algorithm's state tensors, in its order
  };
  /// The state of `param`; state tensors are moved to its device and dtype if it moved.
  ParamState& state(const Tensor& param);

 private:
  std::vector<std::vector<Tensor>> groups_;
  std::unordered_map<const void*, ParamState> state_;
};

}  // namespace ember::optim
