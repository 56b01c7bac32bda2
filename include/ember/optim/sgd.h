// optim::SGD: stochastic gradient descent with momentum, dampening, Nesterov and weight decay.
#pragma once

#include "ember/optim/optimizer.h"

namespace ember::optim {

struct SGDOptions {
  explicit SGDOptions(double lr) : lr_(lr) {}
  SGDOptions& lr(double v) {
    lr_ = v;
    return *this;
  }
  SGDOptions& momentum(double v) {
    momentum_ = v;
    return *this;
  }
  SGDOptions& dampening(double v) {
    dampening_ = v;
    return *this;
  }
  SGDOptions& weight_decay(double v) {
    weight_decay_ = v;
    return *this;
  }
  SGDOptions& nesterov(bool v) {
    nesterov_ = v;
    return *this;
  }
  SGDOptions& maximize(bool v) {
    maximize_ = v;
    return *this;
  }
  /// The momentum buffer's first-step flag comes from a step count on the parameter's
  /// device, so a step can be captured in a CUDA graph (after one eager step).
  SGDOptions& capturable(bool v) {
    capturable_ = v;
    return *this;
  }
  double lr() const noexcept { return lr_; }
  double momentum() const noexcept { return momentum_; }
  double dampening() const noexcept { return dampening_; }
  double weight_decay() const noexcept { return weight_decay_; }
  bool nesterov() const noexcept { return nesterov_; }
  bool maximize() const noexcept { return maximize_; }
  bool capturable() const noexcept { return capturable_; }

 private:
  double lr_, momentum_ = 0, dampening_ = 0, weight_decay_ = 0;
  bool nesterov_ = false, maximize_ = false, capturable_ = false;
};

/// torch.optim.SGD's update, exactly: d = g (+ wd * p); with momentum, buf = d on the
/// first step, else buf = momentum * buf + (1 - dampening) * d, and d = buf (Nesterov:
/// d + momentum * buf); p -= lr * d. Invalid options are ValueErrors with PyTorch's text.
class SGD : public Optimizer {
 public:
  SGD(std::vector<Tensor> params, SGDOptions options);
  /// Adds a parameter group with its own options.
  void add_param_group(std::vector<Tensor> params, SGDOptions options);
  SGDOptions& options(size_t group = 0) { return options_.at(group); }
  double lr(size_t group = 0) const override { return options_.at(group).lr(); }
  void set_lr(double lr, size_t group = 0) override {
    check_finite_lr(lr);
    options_.at(group).lr(lr);
  }
  bool has_momentum() const override { return true; }
  double momentum(size_t group = 0) const override { return options_.at(group).momentum(); }
  void set_momentum(double momentum, size_t group = 0) override { options_.at(group).momentum(momentum); }

 protected:
  void update(size_t group, const std::vector<Tensor>& params, const std::vector<Tensor>& grads) override;
  void check_group(size_t group) const override;
  const char* type_name() const override { return "SGD"; }
  std::vector<std::string> buffer_names() const override { return {"momentum_buffer"}; }
  nn::StateDict group_options(size_t group) const override;
  void load_group_options(size_t group, const nn::StateDict& options, bool apply) override;
  std::vector<SGDOptions> options_;
};

}  // namespace ember::optim
