// optim::Adam and optim::AdamW.
#pragma once

#include <utility>

#include "ember/optim/optimizer.h"

namespace ember::optim {

struct AdamOptions {
  explicit AdamOptions(double lr = 1e-3) : lr_(lr) {}
  AdamOptions& lr(double v) {
    lr_ = v;
    return *this;
  }
  AdamOptions& betas(std::pair<double, double> v) {
    betas_ = v;
    return *this;
  }
  AdamOptions& eps(double v) {
    eps_ = v;
    return *this;
  }
  AdamOptions& weight_decay(double v) {
    weight_decay_ = v;
    return *this;
  }
  AdamOptions& maximize(bool v) {
    maximize_ = v;
    return *this;
  }
  /// The step count lives on the parameter's device and step() never reads it on the
  /// host, so a step can be captured in a CUDA graph (after one eager step).
  AdamOptions& capturable(bool v) {
    capturable_ = v;
    return *this;
  }
  double lr() const noexcept { return lr_; }
  std::pair<double, double> betas() const noexcept { return betas_; }
  double eps() const noexcept { return eps_; }
  double weight_decay() const noexcept { return weight_decay_; }
  bool maximize() const noexcept { return maximize_; }
  bool capturable() const noexcept { return capturable_; }

 protected:
  double lr_;
  std::pair<double, double> betas_{0.9, 0.999};
  double eps_ = 1e-8, weight_decay_ = 0;
  bool maximize_ = false;
  bool capturable_ = false;
};

/// AdamW's options: Adam's, with weight_decay 1e-2 by default.
struct AdamWOptions : AdamOptions {
  explicit AdamWOptions(double lr = 1e-3) : AdamOptions(lr) { weight_decay_ = 1e-2; }
  AdamWOptions& lr(double v) {
    lr_ = v;
    return *this;
  }
  AdamWOptions& betas(std::pair<double, double> v) {
    betas_ = v;
    return *this;
  }
  AdamWOptions& eps(double v) {
    eps_ = v;
    return *this;
  }
  AdamWOptions& weight_decay(double v) {
    weight_decay_ = v;
    return *this;
  }
  AdamWOptions& maximize(bool v) {
    maximize_ = v;
    return *this;
  }
  AdamWOptions& capturable(bool v) {
    capturable_ = v;
    return *this;
  }
  using AdamOptions::betas;
  using AdamOptions::capturable;
  using AdamOptions::eps;
  using AdamOptions::lr;
  using AdamOptions::maximize;
  using AdamOptions::weight_decay;
};

/// torch.optim.Adam's update, exactly (per parameter step count t):
/// g (+ wd * p); m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2;
/// p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps).
class Adam : public Optimizer {
 public:
  Adam(std::vector<Tensor> params, AdamOptions options = AdamOptions());
  void add_param_group(std::vector<Tensor> params, AdamOptions options);
  AdamOptions& options(size_t group = 0) { return options_.at(group); }
  double lr(size_t group = 0) const override { return options_.at(group).lr(); }
  void set_lr(double lr, size_t group = 0) override {
    check_finite_lr(lr);
    options_.at(group).lr(lr);
  }
  /// beta1, what OneCycleLR cycles (betas.second is kept).
  bool has_momentum() const override { return true; }
  bool momentum_is_beta1() const override { return true; }
  double momentum(size_t group = 0) const override { return options_.at(group).betas().first; }
  void set_momentum(double beta1, size_t group = 0) override {
    options_.at(group).betas({beta1, options_.at(group).betas().second});
  }

 protected:
  Adam(bool decoupled_weight_decay) : decoupled_(decoupled_weight_decay) {}
  void update(size_t group, const std::vector<Tensor>& params, const std::vector<Tensor>& grads) override;
  void check_group(size_t group) const override;
  const char* type_name() const override { return decoupled_ ? "AdamW" : "Adam"; }
  std::vector<std::string> buffer_names() const override { return {"exp_avg", "exp_avg_sq"}; }
  bool saves_step() const override { return true; }
  nn::StateDict group_options(size_t group) const override;
  void load_group_options(size_t group, const nn::StateDict& options, bool apply) override;
  bool decoupled_ = false;
  std::vector<AdamOptions> options_;
};

/// torch.optim.AdamW: Adam with decoupled weight decay, p *= 1 - lr * wd before the step.
class AdamW : public Adam {
 public:
  AdamW(std::vector<Tensor> params, AdamWOptions options = AdamWOptions());
  void add_param_group(std::vector<Tensor> params, AdamWOptions options);
};

}  // namespace ember::optim
