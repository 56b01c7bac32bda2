// Learning-rate schedulers (torch.optim.lr_scheduler).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ember/nn/state_dict.h"
#include "ember/optim/optimizer.h"

namespace ember::detail::optim {
class SchedulerStateReader;
}

namespace ember::optim {

/// torch.optim.lr_scheduler.LRScheduler. Construction attaches the scheduler to the
/// optimizer as PyTorch's does (each group's initial_lr is set if it has none; base_lrs are
/// the groups' initial_lr) and makes the initial step, epoch 0. step() advances one epoch
/// with the chainable form (get_lr() as PyTorch's, reading the groups' current lr). A step
/// that would hand the optimizer a non-finite learning rate, or take last_epoch past INT64_MAX,
/// is a ValueError that changes nothing; the integers a schedule computes with (epochs,
/// periods) are exact for every int64, as Python's are.
///
/// state_dict() is PyTorch's scheduler.state_dict() flattened to names -> tensors, so it
/// goes through ember::save under a prefix beside the optimizer's (Note [Scheduler state
/// dicts] in src/optim/lr_scheduler.cpp). load_state_dict() checks everything first: a
/// missing or unexpected key, a value of the wrong kind or size, or one out of range is a
/// ValueError and changes nothing. As in PyTorch it restores the scheduler, not the
/// optimizer's learning rates: load the optimizer's state dict too.
class LRScheduler {
 public:
  virtual ~LRScheduler() = default;
  LRScheduler(const LRScheduler&) = delete;
  LRScheduler& operator=(const LRScheduler&) = delete;

  virtual void step();
  /// The learning rates of the groups after the last step (or construction).
  std::vector<double> get_last_lr() const { return last_lr_; }
  int64_t last_epoch() const noexcept { return last_epoch_; }
  std::vector<double> base_lrs() const { return base_lrs_; }
  Optimizer& optimizer() const noexcept { return optimizer_; }

  nn::StateDict state_dict() const;
  void load_state_dict(const nn::StateDict& state_dict);

  /// The class name ("StepLR"), in messages.
  virtual const char* type_name() const = 0;

 protected:
  explicit LRScheduler(Optimizer& optimizer) : optimizer_(optimizer) {}
  /// The rest of PyTorch's LRScheduler.__init__ (last_epoch = -1): each group's initial_lr
  /// is set if it has none, base_lrs are the groups' initial_lr, then initial_step(). The
  /// concrete classes call it last in their constructors, once their arguments are checked,
  /// so that a bad argument leaves the optimizer as it was. ReduceLROnPlateau and
  /// SequentialLR do not (their PyTorch classes do not call it either).
  void attach();
  /// PyTorch's _initial_step: _step_count = 0, then one step() in initial mode.
  void initial_step();
  /// PyTorch's _update_lr: epoch given (SequentialLR's restart at 0) uses closed_form_lr()
  /// where the class has one, else get_lr().
  void update_lr(const int64_t* epoch);
  /// The chainable form, called with last_epoch already advanced. By default the groups'
  /// current learning rates.
  virtual std::vector<double> get_lr();
  virtual bool has_closed_form() const { return false; }
  virtual std::vector<double> closed_form_lr() const { return {}; }
  /// The groups' current learning rates.
  std::vector<double> group_lrs() const;
  /// ValueError unless every value is finite, naming the group, the value and the epoch:
  /// no scheduler hands an optimizer a non-finite learning rate (or momentum), and a step
  /// that would is refused before anything changes.
  void check_finite(const std::vector<double>& values, int64_t epoch, const char* what = "learning rate") const;
  /// counter + 1, or a ValueError where that would overflow int64 (Python's ints do not; a
  /// counter loaded as INT64_MAX cannot step on).
  int64_t advanced(int64_t counter, const char* name) const;

  /// The class's own entries of state_dict() (before the common ones), and reading them
  /// back: load_state(reader, false) only checks (through the reader), and is called again
  /// with apply = true once every check has passed.
  virtual void save_state(nn::StateDict& out) const = 0;
  virtual void load_state(ember::detail::optim::SchedulerStateReader& in, bool apply) = 0;
  /// Whether "base_lrs" and "_step_count" are saved (false where PyTorch's class has none).
  virtual bool saves_base_state() const { return true; }
  /// The problems load_state_dict() would report, empty if it would load.
  std::vector<std::string> state_problems(const nn::StateDict& state_dict);

  Optimizer& optimizer_;
  std::vector<double> base_lrs_;
  std::vector<double> last_lr_;
  int64_t last_epoch_ = -1;
  int64_t step_count_ = 0;
  bool is_initial_ = false;  // PyTorch's _is_initial, during initial_step()

 private:
  friend class SequentialLR;
  void check_state(ember::detail::optim::SchedulerStateReader& reader);
};

/// StepLR: the lr of each group is multiplied by gamma every step_size epochs. As in PyTorch
/// 2.x a negative step_size is accepted (Python's % and //: the chainable form then decays
/// every |step_size| epochs); 0 is a ValueError (PyTorch's first step divides by it).
class StepLR : public LRScheduler {
 public:
  StepLR(Optimizer& optimizer, int64_t step_size, double gamma = 0.1);
  const char* type_name() const override { return "StepLR"; }

 protected:
  std::vector<double> get_lr() override;
  bool has_closed_form() const override { return true; }
  std::vector<double> closed_form_lr() const override;
  void save_state(nn::StateDict& out) const override;
  void load_state(ember::detail::optim::SchedulerStateReader& in, bool apply) override;
  int64_t step_size_;
  double gamma_;
};

/// MultiStepLR: multiplied by gamma at each milestone (a milestone listed twice, gamma^2).
class MultiStepLR : public LRScheduler {
 public:
  MultiStepLR(Optimizer& optimizer, std::vector<int64_t> milestones, double gamma = 0.1);
  const char* type_name() const override { return "MultiStepLR"; }

 protected:
  std::vector<double> get_lr() override;
  bool has_closed_form() const override { return true; }
  std::vector<double> closed_form_lr() const override;
  void save_state(nn::StateDict& out) const override;
  void load_state(ember::detail::optim::SchedulerStateReader& in, bool apply) override;
  std::vector<int64_t> milestones_;  // sorted, with repeats (PyTorch's Counter)
  double gamma_;
};

/// ExponentialLR: multiplied by gamma every epoch.
class ExponentialLR : public LRScheduler {
 public:
  ExponentialLR(Optimizer& optimizer, double gamma);
  const char* type_name() const override { return "ExponentialLR"; }

 protected:
  std::vector<double> get_lr() override;
  bool has_closed_form() const override { return true; }
  std::vector<double> closed_form_lr() const override;
  void save_state(nn::StateDict& out) const override;
  void load_state(ember::detail::optim::SchedulerStateReader& in, bool apply) override;
  double gamma_;
};

/// LambdaLR: lr = base_lr * lr_lambda(epoch), one function for every group or one each.
/// As in PyTorch, the functions are not part of state_dict().
class LambdaLR : public LRScheduler {
 public:
  using Lambda = std::function<double(int64_t)>;
  LambdaLR(Optimizer& optimizer, Lambda lr_lambda);
  LambdaLR(Optimizer& optimizer, std::vector<Lambda> lr_lambdas);
  const char* type_name() const override { return "LambdaLR"; }

 protected:
  std::vector<double> get_lr() override;
  void save_state(nn::StateDict&) const override {}
  void load_state(ember::detail::optim::SchedulerStateReader&, bool) override {}
  std::vector<Lambda> lr_lambdas_;
};

/// CosineAnnealingLR: eta_min + (base_lr - eta_min) (1 + cos(pi epoch / T_max)) / 2, by
/// PyTorch's recursive form (which also follows an lr changed from outside).
class CosineAnnealingLR : public LRScheduler {
 public:
  CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min = 0.0);
  const char* type_name() const override { return "CosineAnnealingLR"; }

 protected:
  std::vector<double> get_lr() override;
  bool has_closed_form() const override { return true; }
  std::vector<double> closed_form_lr() const override;
  void save_state(nn::StateDict& out) const override;
  void load_state(ember::detail::optim::SchedulerStateReader& in, bool apply) override;
  int64_t T_max_;
  double eta_min_;
};

/// LinearLR: the factor goes linearly from start_factor to end_factor over total_iters.
class LinearLR : public LRScheduler {
 public:
  LinearLR(Optimizer& optimizer, double start_factor = 1.0 / 3, double end_factor = 1.0, int64_t total_iters = 5);
  const char* type_name() const override { return "LinearLR"; }

 protected:
  std::vector<double> get_lr() override;
  bool has_closed_form() const override { return true; }
  std::vector<double> closed_form_lr() const override;
  void save_state(nn::StateDict& out) const override;
  void load_state(ember::detail::optim::SchedulerStateReader& in, bool apply) override;
  double start_factor_, end_factor_;
  int64_t total_iters_;
};

/// OneCycleLR's options beyond max_lr and total_steps (PyTorch's keyword arguments, with
/// its defaults). base_momentum and max_momentum take one value for every group or one each.
struct OneCycleLROptions {
  OneCycleLROptions& pct_start(double v) {
    pct_start_ = v;
    return *this;
  }
  OneCycleLROptions& anneal_strategy(std::string v) {
    anneal_strategy_ = std::move(v);
    return *this;
  }
  OneCycleLROptions& cycle_momentum(bool v) {
    cycle_momentum_ = v;
    return *this;
  }
  OneCycleLROptions& base_momentum(double v) {
    base_momentum_ = {v};
    base_momentum_list_ = false;
    return *this;
  }
  OneCycleLROptions& base_momentum(std::vector<double> v) {
    base_momentum_ = std::move(v);
    base_momentum_list_ = true;
    return *this;
  }
  OneCycleLROptions& max_momentum(double v) {
    max_momentum_ = {v};
    max_momentum_list_ = false;
    return *this;
  }
  OneCycleLROptions& max_momentum(std::vector<double> v) {
    max_momentum_ = std::move(v);
    max_momentum_list_ = true;
    return *this;
  }
  OneCycleLROptions& div_factor(double v) {
    div_factor_ = v;
    return *this;
  }
  OneCycleLROptions& final_div_factor(double v) {
    final_div_factor_ = v;
    return *this;
  }
  OneCycleLROptions& three_phase(bool v) {
    three_phase_ = v;
    return *this;
  }

 private:
  friend class OneCycleLR;
  double pct_start_ = 0.3;
  std::string anneal_strategy_ = "cos";
  bool cycle_momentum_ = true;
  std::vector<double> base_momentum_{0.85}, max_momentum_{0.95};
  bool base_momentum_list_ = false, max_momentum_list_ = false;
  double div_factor_ = 25.0, final_div_factor_ = 1e4;
  bool three_phase_ = false;
};

/// OneCycleLR, stepped once per batch: from max_lr / div_factor up to max_lr over
/// pct_start of total_steps, then down to initial_lr / final_div_factor (three_phase: back
/// to initial_lr, then down), cosine or linear; with cycle_momentum, the optimizer's
/// momentum (SGD) or beta1 (Adam, AdamW) moves inversely between max_momentum and
/// base_momentum. PyTorch keeps max_lr, min_lr and the momenta in the param groups; ember
/// keeps them in the scheduler (and its state_dict()). Stepping past total_steps is a
/// ValueError that changes nothing; so is a step in a phase of zero length (PyTorch's
/// ZeroDivisionError: pct_start * total_steps == 1 fails at construction), and div_factor or
/// final_div_factor 0, or a cycle whose learning rates are not finite, at construction.
class OneCycleLR : public LRScheduler {
 public:
  OneCycleLR(Optimizer& optimizer, double max_lr, int64_t total_steps, OneCycleLROptions options = {});
  OneCycleLR(Optimizer& optimizer, std::vector<double> max_lrs, int64_t total_steps, OneCycleLROptions options = {});
  void step() override;
  const char* type_name() const override { return "OneCycleLR"; }
  int64_t total_steps() const noexcept { return total_steps_; }

 protected:
  std::vector<double> get_lr() override;
  void save_state(nn::StateDict& out) const override;
  void load_state(ember::detail::optim::SchedulerStateReader& in, bool apply) override;
  double anneal(double start, double end, double pct) const;
  /// The learning rates (and, with cycle_momentum, the momenta) of `step`, PyTorch's get_lr
  /// without side effects. A step in a phase of zero length is PyTorch's ZeroDivisionError
  /// and a non-finite value is refused: both are ValueErrors.
  std::vector<double> schedule(int64_t step, std::vector<double>* momenta) const;
  int64_t total_steps_;
  std::vector<double> phase_ends_;  // PyTorch's _schedule_phases[i]["end_step"]: two or three phases
  std::string anneal_strategy_;
  bool cycle_momentum_, use_beta1_ = false;
  std::vector<double> max_lrs_, min_lrs_, max_momentums_, base_momentums_;
};

/// ReduceLROnPlateau: step(metric) reduces each group's lr by `factor` (not below its
/// min_lr; a change of eps or less is skipped) once the metric has not improved for more
/// than `patience` steps, then waits `cooldown` steps. step() without a metric is a TypeError.
/// As in PyTorch 2.x, only factor >= 1.0 is refused: factor NaN is accepted (and reduces
/// nothing); a reduction to a non-finite learning rate is a ValueError that changes nothing.
class ReduceLROnPlateau : public LRScheduler {
 public:
  ReduceLROnPlateau(Optimizer& optimizer, std::string mode = "min", double factor = 0.1, int64_t patience = 10,
                    double threshold = 1e-4, std::string threshold_mode = "rel", int64_t cooldown = 0,
                    double min_lr = 0, double eps = 1e-8);
  /// One min_lr for each group.
  ReduceLROnPlateau(Optimizer& optimizer, std::string mode, double factor, int64_t patience, double threshold,
                    std::string threshold_mode, int64_t cooldown, std::vector<double> min_lrs, double eps = 1e-8);
  void step(double metric);
  void step() override;
  const char* type_name() const override { return "ReduceLROnPlateau"; }
  double best() const noexcept { return best_; }
  int64_t num_bad_epochs() const noexcept { return num_bad_epochs_; }
  int64_t cooldown_counter() const noexcept { return cooldown_counter_; }

 protected:
  void save_state(nn::StateDict& out) const override;
  void load_state(ember::detail::optim::SchedulerStateReader& in, bool apply) override;
  bool saves_base_state() const override { return false; }
  bool is_better(double a, double best) const;
  double factor_;
  std::vector<double> min_lrs_;
  bool has_default_min_lr_;
  double default_min_lr_;
  int64_t patience_, cooldown_, cooldown_counter_ = 0;
  std::string mode_, threshold_mode_;
  double threshold_, eps_, best_, mode_worse_;
  int64_t num_bad_epochs_ = 0;
};

/// SequentialLR: schedulers[0] until milestones[0], then schedulers[1] (restarted at its
/// epoch 0), and so on. Its state_dict() holds each scheduler's under "_schedulers.<i>.".
class SequentialLR : public LRScheduler {
 public:
  SequentialLR(Optimizer& optimizer, std::vector<std::shared_ptr<LRScheduler>> schedulers,
               std::vector<int64_t> milestones);
  void step() override;
  const char* type_name() const override { return "SequentialLR"; }
  const std::vector<std::shared_ptr<LRScheduler>>& schedulers() const noexcept { return schedulers_; }

 protected:
  void save_state(nn::StateDict& out) const override;
  void load_state(ember::detail::optim::SchedulerStateReader& in, bool apply) override;
  bool saves_base_state() const override { return false; }
  /// The schedulers PyTorch's recursive_undo steps back (nested SequentialLRs' own), in order.
  void collect_leaves(LRScheduler& scheduler, std::vector<LRScheduler*>& out);
  std::vector<std::shared_ptr<LRScheduler>> schedulers_;
  std::vector<int64_t> milestones_;
};

}  // namespace ember::optim
