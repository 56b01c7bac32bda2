// ReduceLROnPlateau, as PyTorch 2.x's (its checks, messages and state).
#include <algorithm>
#include <cmath>
#include <limits>

#include "ember/errors.h"
#include "ember/optim/lr_scheduler.h"
#include "optim/scheduler_state.h"

namespace ember::optim {

using ember::detail::cat;
using ember::detail::optim::SchedulerStateReader;

namespace {

// PyTorch's _init_is_better checks, as (problem or empty).
std::string mode_problem(const std::string& mode, const std::string& threshold_mode) {
  if (mode != "min" && mode != "max") return "mode " + mode + " is unknown!";
  if (threshold_mode != "rel" && threshold_mode != "abs") return "threshold mode " + threshold_mode + " is unknown!";
  return {};
}

double worst_for(const std::string& mode) {
  return mode == "min" ? std::numeric_limits<double>::infinity() : -std::numeric_limits<double>::infinity();
}

}  // namespace

ReduceLROnPlateau::ReduceLROnPlateau(Optimizer& optimizer, std::string mode, double factor, int64_t patience,
                                     double threshold, std::string threshold_mode, int64_t cooldown, double min_lr,
                                     double eps)
    : ReduceLROnPlateau(optimizer, std::move(mode), factor, patience, threshold, std::move(threshold_mode), cooldown,
                        std::vector<double>(optimizer.num_param_groups(), min_lr), eps) {
  has_default_min_lr_ = true;
  default_min_lr_ = min_lr;
}

ReduceLROnPlateau::ReduceLROnPlateau(Optimizer& optimizer, std::string mode, double factor, int64_t patience,
                                     double threshold, std::string threshold_mode, int64_t cooldown,
                                     std::vector<double> min_lrs, double eps)
    : LRScheduler(optimizer),
      factor_(factor),
      min_lrs_(std::move(min_lrs)),
      has_default_min_lr_(false),
      default_min_lr_(0),
      patience_(patience),
      cooldown_(cooldown),
      mode_(std::move(mode)),
      threshold_mode_(std::move(threshold_mode)),
      threshold_(threshold),
      eps_(eps) {
  // PyTorch 2.x's check, `factor >= 1.0`: NaN passes (and then reduces nothing).
  EMBER_CHECK(!(factor >= 1.0), ValueError, "Factor should be < 1.0.");
  EMBER_CHECK(min_lrs_.size() == optimizer.num_param_groups(), ValueError, "expected ", optimizer.num_param_groups(),
              " min_lrs, got ", min_lrs_.size());
  const std::string problem = mode_problem(mode_, threshold_mode_);
  EMBER_CHECK(problem.empty(), ValueError, problem);
  last_epoch_ = 0;
  last_lr_ = group_lrs();
  mode_worse_ = worst_for(mode_);
  best_ = mode_worse_;  // PyTorch's _reset
}

void ReduceLROnPlateau::step() {
  throw TypeError("ReduceLROnPlateau.step() missing 1 required positional argument: 'metrics'");
}

bool ReduceLROnPlateau::is_better(double a, double best) const {
  if (mode_ == "min" && threshold_mode_ == "rel") return a < best * (1.0 - threshold_);
  if (mode_ == "min") return a < best - threshold_;
  if (threshold_mode_ == "rel") return a > best * (threshold_ + 1.0);
  return a > best + threshold_;
}

void ReduceLROnPlateau::step(double metric) {
  // PyTorch's step and _reduce_lr, computed first and then applied, so that an error
  // changes nothing.
  const size_t groups = optimizer_.num_param_groups();
  const int64_t last_epoch = advanced(last_epoch_, "last_epoch");
  double best = best_;
  // 128 bits: a loaded num_bad_epochs may be INT64_MAX; one more then exceeds any patience
  // and is reset, as Python's int does.
  __int128 bad = num_bad_epochs_;
  int64_t cooldown_counter = cooldown_counter_;
  if (is_better(metric, best)) {
    best = metric;
    bad = 0;
  } else {
    ++bad;
  }
  if (cooldown_counter > 0) {
    --cooldown_counter;
    bad = 0;  // bad epochs in cooldown are ignored
  }
  std::vector<double> min_lrs = min_lrs_;
  std::vector<double> lrs = group_lrs();
  if (bad > patience_) {
    if (min_lrs.size() != groups) {
      EMBER_CHECK(has_default_min_lr_, ValueError, "The number of param groups in the `optimizer` (", groups,
                  ") differs from when `ReduceLROnPlateau` was initialized (", min_lrs.size(),
                  "), usually due to a new param group being added to the optimizer. Please modify the `min_lrs` "
                  "field to match the length of the `optimizer` param groups.");
      min_lrs.assign(groups, default_min_lr_);
    }
    for (size_t g = 0; g < groups; ++g) {
      const double new_lr = std::max(lrs[g] * factor_, min_lrs[g]);
      if (lrs[g] - new_lr > eps_) lrs[g] = new_lr;
    }
    cooldown_counter = cooldown_;
    bad = 0;
  }
  check_finite(lrs, last_epoch);
  for (size_t g = 0; g < groups; ++g) {
    if (lrs[g] != optimizer_.lr(g)) optimizer_.set_lr(lrs[g], g);
  }
  last_epoch_ = last_epoch;
  best_ = best;
  num_bad_epochs_ = static_cast<int64_t>(bad);  // 0 or <= patience here
  cooldown_counter_ = cooldown_counter;
  min_lrs_ = std::move(min_lrs);
  last_lr_ = group_lrs();
}

void ReduceLROnPlateau::save_state(nn::StateDict& out) const {
  out.insert("factor", ember::detail::optim::float_tensor(factor_));
  if (has_default_min_lr_) out.insert("default_min_lr", ember::detail::optim::float_tensor(default_min_lr_));
  out.insert("min_lrs", ember::detail::optim::floats_tensor(min_lrs_));
  out.insert("patience", ember::detail::optim::int_tensor(patience_));
  out.insert("cooldown", ember::detail::optim::int_tensor(cooldown_));
  out.insert("cooldown_counter", ember::detail::optim::int_tensor(cooldown_counter_));
  out.insert("eps", ember::detail::optim::float_tensor(eps_));
  out.insert("mode_worse", ember::detail::optim::float_tensor(mode_worse_));
  out.insert("mode", ember::detail::optim::text_tensor(mode_));
  out.insert("threshold", ember::detail::optim::float_tensor(threshold_));
  out.insert("threshold_mode", ember::detail::optim::text_tensor(threshold_mode_));
  out.insert("best", ember::detail::optim::float_tensor(best_));
  out.insert("num_bad_epochs", ember::detail::optim::int_tensor(num_bad_epochs_));
}

void ReduceLROnPlateau::load_state(SchedulerStateReader& in, bool apply) {
  const double factor = in.number("factor");
  const bool has_default = in.has("default_min_lr");
  const double default_min_lr = has_default ? in.number("default_min_lr") : 0;
  const std::vector<double> min_lrs = in.numbers("min_lrs", static_cast<int64_t>(optimizer_.num_param_groups()));
  const int64_t patience = in.integer("patience"), cooldown = in.integer("cooldown");
  const int64_t cooldown_counter = in.integer("cooldown_counter");
  const double eps = in.number("eps");
  in.number("mode_worse");  // recomputed from mode, as PyTorch's load_state_dict does
  const std::string mode = in.text("mode"), threshold_mode = in.text("threshold_mode");
  const double threshold = in.number("threshold"), best = in.number("best");
  const int64_t bad = in.integer("num_bad_epochs");
  in.check(!in.has("factor") || !(factor >= 1.0), "invalid value for factor: Factor should be < 1.0.");
  if (in.has("mode") && in.has("threshold_mode")) {
    const std::string problem = mode_problem(mode, threshold_mode);
    in.check(problem.empty(), "invalid mode: " + problem);
  }
  in.check(cooldown_counter >= 0 && bad >= 0, "invalid value for cooldown_counter or num_bad_epochs: expected >= 0");
  if (!apply) return;
  factor_ = factor;
  has_default_min_lr_ = has_default;
  default_min_lr_ = default_min_lr;
  min_lrs_ = min_lrs;
  patience_ = patience;
  cooldown_ = cooldown;
  cooldown_counter_ = cooldown_counter;
  eps_ = eps;
  mode_ = mode;
  threshold_mode_ = threshold_mode;
  threshold_ = threshold;
  mode_worse_ = worst_for(mode);
  best_ = best;
  num_bad_epochs_ = bad;
}

}  // namespace ember::optim
