// OneCycleLR, as PyTorch 2.x's: its checks and messages, its phases and annealing.
#include <cmath>
#include <cstdint>
#include <numbers>

#include "ember/errors.h"
#include "ember/optim/lr_scheduler.h"
#include "nn/python_repr.h"
#include "optim/scheduler_state.h"

namespace ember::optim {

using ember::detail::cat;
using ember::detail::python_float;
using ember::detail::optim::all_finite;
using ember::detail::optim::SchedulerStateReader;

namespace {

// PyTorch's last end_step, total_steps - 1 (an int there, a float here).
double last_phase_end(int64_t total_steps) { return static_cast<double>(total_steps - 1); }

// PyTorch's _format_param: one value for every group, or one each.
std::vector<double> per_group(const char* name, const Optimizer& optimizer, const std::vector<double>& values,
                              bool is_list) {
  const size_t groups = optimizer.num_param_groups();
  if (!is_list) return std::vector<double>(groups, values.at(0));
  EMBER_CHECK(values.size() == groups, ValueError, name, " must have the same length as optimizer.param_groups. ", name,
              " has ", values.size(), " values, param_groups has ", groups, ".");
  return values;
}

}  // namespace

OneCycleLR::OneCycleLR(Optimizer& optimizer, double max_lr, int64_t total_steps, OneCycleLROptions options)
    : OneCycleLR(optimizer, std::vector<double>(optimizer.num_param_groups(), max_lr), total_steps,
                 std::move(options)) {}

OneCycleLR::OneCycleLR(Optimizer& optimizer, std::vector<double> max_lrs, int64_t total_steps,
                       OneCycleLROptions options)
    : LRScheduler(optimizer), total_steps_(total_steps) {
  // Every argument is checked before the optimizer is touched (PyTorch sets initial_lr
  // before it checks the momentum).
  EMBER_CHECK(total_steps > 0, ValueError, "Expected positive integer total_steps, but got ", total_steps);
  const double pct = options.pct_start_;
  const auto total = static_cast<double>(total_steps);
  if (options.three_phase_) {
    phase_ends_ = {pct * total - 1, 2 * pct * total - 2, last_phase_end(total_steps)};
  } else {
    phase_ends_ = {pct * total - 1, last_phase_end(total_steps)};
  }
  EMBER_CHECK(!(pct < 0 || pct > 1), ValueError, "Expected float between 0 and 1 pct_start, but got ",
              python_float(pct));
  EMBER_CHECK(options.anneal_strategy_ == "cos" || options.anneal_strategy_ == "linear", ValueError,
              "anneal_strategy must be one of 'cos' or 'linear', instead got ", options.anneal_strategy_);
  anneal_strategy_ = options.anneal_strategy_;
  max_lrs_ = per_group("max_lr", optimizer, max_lrs, /*is_list=*/true);
  cycle_momentum_ = options.cycle_momentum_;
  if (cycle_momentum_) {
    EMBER_CHECK(optimizer.has_momentum(), ValueError,
                "optimizer must support momentum or beta1 with `cycle_momentum` option enabled");
    use_beta1_ = optimizer.momentum_is_beta1();
    max_momentums_ = per_group("max_momentum", optimizer, options.max_momentum_, options.max_momentum_list_);
    base_momentums_ = per_group("base_momentum", optimizer, options.base_momentum_, options.base_momentum_list_);
  }

  // PyTorch divides by both (ZeroDivisionError); its cycle would reach any non-finite end.
  EMBER_CHECK(options.div_factor_ != 0, ValueError, "OneCycleLR: div_factor must not be 0 (float division by zero)");
  EMBER_CHECK(options.final_div_factor_ != 0, ValueError,
              "OneCycleLR: final_div_factor must not be 0 (float division by zero)");
  for (size_t g = 0; g < optimizer.num_param_groups(); ++g) {
    const double initial_lr = max_lrs_[g] / options.div_factor_;
    base_lrs_.push_back(initial_lr);
    min_lrs_.push_back(initial_lr / options.final_div_factor_);
    EMBER_CHECK(all_finite({max_lrs_[g], initial_lr, min_lrs_[g]}), ValueError,
                "OneCycleLR: the learning rates of the cycle must be finite, but param group ", g, " has max_lr ",
                python_float(max_lrs_[g]), ", initial_lr (max_lr / div_factor) ", python_float(initial_lr),
                " and min_lr (initial_lr / final_div_factor) ", python_float(min_lrs_[g]));
  }
  // The initial step's values, before the optimizer is touched: a first phase of zero length
  // (pct_start * total_steps == 1) is PyTorch's ZeroDivisionError at construction.
  schedule(0, nullptr);
  for (size_t g = 0; g < optimizer.num_param_groups(); ++g) {
    optimizer.set_initial_lr(base_lrs_[g], g);
    if (cycle_momentum_) optimizer.set_momentum(max_momentums_[g], g);
  }
  attach();
}

double OneCycleLR::anneal(double start, double end, double pct) const {
  if (anneal_strategy_ == "cos") {
    const double cos_out = std::cos(std::numbers::pi * pct) + 1;
    return end + (start - end) / 2.0 * cos_out;
  }
  return (end - start) * pct + start;
}

void OneCycleLR::step() {
  // PyTorch 2.x raises from get_lr once last_epoch has moved past total_steps, counting that
  // step ("Tried to step 4 times" for total_steps 3; 1.13 said 5); here nothing moves. The
  // count is unsigned: last_epoch may be INT64_MAX after a load (then >= total_steps > 0).
  EMBER_CHECK(last_epoch_ < total_steps_, ValueError, "Tried to step ", static_cast<uint64_t>(last_epoch_) + 1,
              " times. The specified number of total steps is ", total_steps_);
  LRScheduler::step();
}

std::vector<double> OneCycleLR::schedule(int64_t step, std::vector<double>* momenta) const {
  const auto step_num = static_cast<double>(step);
  const bool three = phase_ends_.size() == 3;
  std::vector<double> lrs, moms;
  for (size_t g = 0; g < optimizer_.num_param_groups() && g < base_lrs_.size(); ++g) {
    // The phases' (start, end) lr and momentum, PyTorch's _schedule_phases.
    const double initial = base_lrs_[g], top = max_lrs_[g], bottom = min_lrs_[g];
    const double m_max = cycle_momentum_ ? max_momentums_[g] : 0, m_base = cycle_momentum_ ? base_momentums_[g] : 0;
    const double lr_from[3] = {initial, top, initial}, lr_to[3] = {top, three ? initial : bottom, bottom};
    const double m_from[3] = {m_max, m_base, m_max}, m_to[3] = {m_base, m_max, m_max};
    double start_step = 0.0;
    for (size_t i = 0; i < phase_ends_.size(); ++i) {
      const double end_step = phase_ends_[i];
      if (step_num <= end_step || i == phase_ends_.size() - 1) {
        EMBER_CHECK(end_step != start_step, ValueError, "OneCycleLR: step ", step, " falls in phase ", i + 1, " of ",
                    phase_ends_.size(), ", which starts and ends at step ", python_float(end_step),
                    " (float division by zero)");
        const double pct = (step_num - start_step) / (end_step - start_step);
        lrs.push_back(anneal(lr_from[i], lr_to[i], pct));
        if (cycle_momentum_) moms.push_back(anneal(m_from[i], m_to[i], pct));
        break;
      }
      start_step = end_step;
    }
  }
  check_finite(lrs, step);
  check_finite(moms, step, use_beta1_ ? "beta1" : "momentum");
  if (momenta != nullptr) *momenta = std::move(moms);
  return lrs;
}

std::vector<double> OneCycleLR::get_lr() {
  std::vector<double> momenta;
  std::vector<double> lrs = schedule(last_epoch_, &momenta);  // checked before the momenta are set
  for (size_t g = 0; g < momenta.size(); ++g) optimizer_.set_momentum(momenta[g], g);
  return lrs;
}

void OneCycleLR::save_state(nn::StateDict& out) const {
  out.insert("total_steps", ember::detail::optim::int_tensor(total_steps_));
  out.insert("_schedule_phases.end_step", ember::detail::optim::floats_tensor(phase_ends_));
  out.insert("_anneal_func_type", ember::detail::optim::text_tensor(anneal_strategy_));
  out.insert("cycle_momentum", ember::detail::optim::bool_tensor(cycle_momentum_));
  if (cycle_momentum_) out.insert("use_beta1", ember::detail::optim::bool_tensor(use_beta1_));
  out.insert("max_lrs", ember::detail::optim::floats_tensor(max_lrs_));
  out.insert("min_lrs", ember::detail::optim::floats_tensor(min_lrs_));
  if (cycle_momentum_) {
    out.insert("max_momentums", ember::detail::optim::floats_tensor(max_momentums_));
    out.insert("base_momentums", ember::detail::optim::floats_tensor(base_momentums_));
  }
}

void OneCycleLR::load_state(SchedulerStateReader& in, bool apply) {
  const auto groups = static_cast<int64_t>(optimizer_.num_param_groups());
  const int64_t total_steps = in.integer("total_steps");
  const std::vector<double> phase_ends = in.numbers("_schedule_phases.end_step");
  const std::string anneal = in.text("_anneal_func_type");
  const bool cycle_momentum = in.flag("cycle_momentum");
  const std::vector<double> max_lrs = in.numbers("max_lrs", groups), min_lrs = in.numbers("min_lrs", groups);
  bool use_beta1 = false;
  std::vector<double> max_momentums, base_momentums;
  if (cycle_momentum) {
    use_beta1 = in.flag("use_beta1");
    max_momentums = in.numbers("max_momentums", groups);
    base_momentums = in.numbers("base_momentums", groups);
    in.check(optimizer_.has_momentum() && use_beta1 == optimizer_.momentum_is_beta1(),
             cat("cycle_momentum: the saved schedule cycles ", use_beta1 ? "beta1" : "momentum",
                 ", which this optimizer does not have"));
  }
  in.check(!in.has("total_steps") || total_steps > 0,
           cat("invalid value for total_steps: expected a positive integer, got ", total_steps));
  // As the constructor makes them: 2 or 3 finite end steps, the last at total_steps - 1.
  in.check(!in.has("_schedule_phases.end_step") ||
               ((phase_ends.size() == 2 || phase_ends.size() == 3) && all_finite(phase_ends) &&
                (!in.has("total_steps") || total_steps <= 0 || phase_ends.back() == last_phase_end(total_steps))),
           "invalid value for _schedule_phases.end_step: expected 2 or 3 finite end steps, the last total_steps - 1");
  in.check(all_finite(max_lrs) && all_finite(min_lrs), "invalid value for max_lrs or min_lrs: expected finite numbers");
  in.check(all_finite(max_momentums) && all_finite(base_momentums),
           "invalid value for max_momentums or base_momentums: expected finite numbers");
  in.check(!in.has("_anneal_func_type") || anneal == "cos" || anneal == "linear",
           cat("invalid value for _anneal_func_type: expected 'cos' or 'linear', got '", anneal, "'"));
  if (!apply) return;
  total_steps_ = total_steps;
  phase_ends_ = phase_ends;
  anneal_strategy_ = anneal;
  cycle_momentum_ = cycle_momentum;
  use_beta1_ = use_beta1;
  max_lrs_ = max_lrs;
  min_lrs_ = min_lrs;
  max_momentums_ = max_momentums;
  base_momentums_ = base_momentums;
}

}  // namespace ember::optim
