// StepLR, MultiStepLR, ExponentialLR, LambdaLR, CosineAnnealingLR and LinearLR: PyTorch
// 2.x's get_lr (chainable) and _get_closed_form_lr, term by term in the same order so
// that the doubles agree with PyTorch's floats.
#include <algorithm>
#include <cmath>
#include <numbers>

#include "ember/errors.h"
#include "ember/optim/lr_scheduler.h"
#include "optim/scheduler_state.h"

namespace ember::optim {

using ember::detail::cat;
using ember::detail::optim::SchedulerStateReader;

namespace {

constexpr double kPi = std::numbers::pi;

// Python's ints do not overflow; int64 does at the edges a loaded state can reach
// (INT64_MIN % -1, 2 * T_max, last_epoch - 1 - T_max), so those are computed in 128 bits.
using Wide = __int128;

// Python's a // b (floor division), b != 0.
Wide floor_div(Wide a, Wide b) {
  const Wide q = a / b;
  return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

const char* const kStartFactorMessage =
    "Starting multiplicative factor expected to be greater than 0 and less or equal to 1.";
const char* const kEndFactorMessage = "Ending multiplicative factor expected to be between 0 and 1.";

}  // namespace

// ---- StepLR

StepLR::StepLR(Optimizer& optimizer, int64_t step_size, double gamma)
    : LRScheduler(optimizer), step_size_(step_size), gamma_(gamma) {
  // PyTorch 2.x takes any step_size; 0 is a ZeroDivisionError at its first step. A negative
  // one works there through Python's % (decays every |step_size| epochs) and //.
  EMBER_CHECK(step_size != 0, ValueError, "StepLR: step_size must not be 0 (integer modulo by zero)");
  attach();
}

std::vector<double> StepLR::get_lr() {
  std::vector<double> lrs = group_lrs();
  // Whether Python's last_epoch % step_size is 0 (the sign of a remainder does not matter).
  if (last_epoch_ == 0 || Wide{last_epoch_} % step_size_ != 0) return lrs;
  for (double& lr : lrs) lr = lr * gamma_;
  return lrs;
}

std::vector<double> StepLR::closed_form_lr() const {
  std::vector<double> lrs;
  const auto periods = static_cast<double>(floor_div(last_epoch_, step_size_));
  for (double base : base_lrs_) lrs.push_back(base * std::pow(gamma_, periods));
  return lrs;
}

void StepLR::save_state(nn::StateDict& out) const {
  out.insert("step_size", ember::detail::optim::int_tensor(step_size_));
  out.insert("gamma", ember::detail::optim::float_tensor(gamma_));
}

void StepLR::load_state(SchedulerStateReader& in, bool apply) {
  const int64_t step_size = in.integer("step_size");
  const double gamma = in.number("gamma");
  in.check(!in.has("step_size") || step_size != 0, "invalid value for step_size: must not be 0");
  if (apply) step_size_ = step_size, gamma_ = gamma;
}

// ---- MultiStepLR

MultiStepLR::MultiStepLR(Optimizer& optimizer, std::vector<int64_t> milestones, double gamma)
    : LRScheduler(optimizer), milestones_(std::move(milestones)), gamma_(gamma) {
  std::sort(milestones_.begin(), milestones_.end());
  attach();
}

std::vector<double> MultiStepLR::get_lr() {
  std::vector<double> lrs = group_lrs();
  const auto count = std::count(milestones_.begin(), milestones_.end(), last_epoch_);
  if (count == 0) return lrs;
  for (double& lr : lrs) lr = lr * std::pow(gamma_, static_cast<double>(count));
  return lrs;
}

std::vector<double> MultiStepLR::closed_form_lr() const {
  // bisect_right(milestones, last_epoch): how many milestones are <= last_epoch.
  const auto passed = std::upper_bound(milestones_.begin(), milestones_.end(), last_epoch_) - milestones_.begin();
  std::vector<double> lrs;
  for (double base : base_lrs_) lrs.push_back(base * std::pow(gamma_, static_cast<double>(passed)));
  return lrs;
}

void MultiStepLR::save_state(nn::StateDict& out) const {
  out.insert("milestones", ember::detail::optim::ints_tensor(milestones_));
  out.insert("gamma", ember::detail::optim::float_tensor(gamma_));
}

void MultiStepLR::load_state(SchedulerStateReader& in, bool apply) {
  std::vector<int64_t> milestones = in.integers("milestones");
  const double gamma = in.number("gamma");
  std::sort(milestones.begin(), milestones.end());
  if (apply) milestones_ = std::move(milestones), gamma_ = gamma;
}

// ---- ExponentialLR

ExponentialLR::ExponentialLR(Optimizer& optimizer, double gamma) : LRScheduler(optimizer), gamma_(gamma) { attach(); }

std::vector<double> ExponentialLR::get_lr() {
  std::vector<double> lrs = group_lrs();
  if (is_initial_) return lrs;
  for (double& lr : lrs) lr = lr * gamma_;
  return lrs;
}

std::vector<double> ExponentialLR::closed_form_lr() const {
  std::vector<double> lrs;
  for (double base : base_lrs_) lrs.push_back(base * std::pow(gamma_, static_cast<double>(last_epoch_)));
  return lrs;
}

void ExponentialLR::save_state(nn::StateDict& out) const {
  out.insert("gamma", ember::detail::optim::float_tensor(gamma_));
}

void ExponentialLR::load_state(SchedulerStateReader& in, bool apply) {
  const double gamma = in.number("gamma");
  if (apply) gamma_ = gamma;
}

// ---- LambdaLR

LambdaLR::LambdaLR(Optimizer& optimizer, Lambda lr_lambda)
    : LambdaLR(optimizer, std::vector<Lambda>(optimizer.num_param_groups(), std::move(lr_lambda))) {}

LambdaLR::LambdaLR(Optimizer& optimizer, std::vector<Lambda> lr_lambdas)
    : LRScheduler(optimizer), lr_lambdas_(std::move(lr_lambdas)) {
  EMBER_CHECK(lr_lambdas_.size() == optimizer.num_param_groups(), ValueError, "Expected ", optimizer.num_param_groups(),
              " lr_lambdas, but got ", lr_lambdas_.size());
  for (const Lambda& f : lr_lambdas_) EMBER_CHECK(static_cast<bool>(f), TypeError, "lr_lambda should be a function");
  attach();
}

std::vector<double> LambdaLR::get_lr() {
  std::vector<double> lrs;
  for (size_t g = 0; g < lr_lambdas_.size() && g < base_lrs_.size(); ++g)
    lrs.push_back(base_lrs_[g] * lr_lambdas_[g](last_epoch_));
  return lrs;
}

// ---- CosineAnnealingLR

CosineAnnealingLR::CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min)
    : LRScheduler(optimizer), T_max_(T_max), eta_min_(eta_min) {
  // PyTorch divides by T_max unchecked (ZeroDivisionError at the first step).
  EMBER_CHECK(T_max != 0, ValueError, "CosineAnnealingLR: T_max must not be 0");
  attach();
}

std::vector<double> CosineAnnealingLR::get_lr() {
  std::vector<double> lrs = group_lrs();
  const auto e = static_cast<double>(last_epoch_);
  const auto T = static_cast<double>(T_max_);
  if (is_initial_) return lrs;
  if (step_count_ == 1 && last_epoch_ > 0) {
    for (size_t g = 0; g < lrs.size() && g < base_lrs_.size(); ++g)
      lrs[g] = eta_min_ + (base_lrs_[g] - eta_min_) * (1 + std::cos(e * kPi / T)) / 2;
  } else if ((Wide{last_epoch_} - 1 - T_max_) % (2 * Wide{T_max_}) == 0) {
    for (size_t g = 0; g < lrs.size() && g < base_lrs_.size(); ++g)
      lrs[g] = lrs[g] + (base_lrs_[g] - eta_min_) * (1 - std::cos(kPi / T)) / 2;
  } else {
    for (double& lr : lrs)
      lr = (1 + std::cos(kPi * e / T)) / (1 + std::cos(kPi * (e - 1) / T)) * (lr - eta_min_) + eta_min_;
  }
  return lrs;
}

std::vector<double> CosineAnnealingLR::closed_form_lr() const {
  std::vector<double> lrs;
  for (double base : base_lrs_) {
    lrs.push_back(eta_min_ + (base - eta_min_) *
                                 (1 + std::cos(kPi * static_cast<double>(last_epoch_) / static_cast<double>(T_max_))) /
                                 2);
  }
  return lrs;
}

void CosineAnnealingLR::save_state(nn::StateDict& out) const {
  out.insert("T_max", ember::detail::optim::int_tensor(T_max_));
  out.insert("eta_min", ember::detail::optim::float_tensor(eta_min_));
}

void CosineAnnealingLR::load_state(SchedulerStateReader& in, bool apply) {
  const int64_t T_max = in.integer("T_max");
  const double eta_min = in.number("eta_min");
  in.check(!in.has("T_max") || T_max != 0, "invalid value for T_max: must not be 0");
  if (apply) T_max_ = T_max, eta_min_ = eta_min;
}

// ---- LinearLR

LinearLR::LinearLR(Optimizer& optimizer, double start_factor, double end_factor, int64_t total_iters)
    : LRScheduler(optimizer), start_factor_(start_factor), end_factor_(end_factor), total_iters_(total_iters) {
  EMBER_CHECK(!(start_factor > 1.0 || start_factor <= 0), ValueError, kStartFactorMessage);
  EMBER_CHECK(!(end_factor > 1.0 || end_factor < 0), ValueError, kEndFactorMessage);
  attach();
}

std::vector<double> LinearLR::get_lr() {
  std::vector<double> lrs = group_lrs();
  if (last_epoch_ == 0) {
    for (double& lr : lrs) lr = lr * start_factor_;
    return lrs;
  }
  if (is_initial_ || last_epoch_ > total_iters_) return lrs;
  const double factor = 1.0 + (end_factor_ - start_factor_) /
                                  (static_cast<double>(total_iters_) * start_factor_ +
                                   static_cast<double>(Wide{last_epoch_} - 1) * (end_factor_ - start_factor_));
  for (double& lr : lrs) lr = lr * factor;
  return lrs;
}

std::vector<double> LinearLR::closed_form_lr() const {
  std::vector<double> lrs;
  const auto done = static_cast<double>(std::min(total_iters_, last_epoch_));
  for (double base : base_lrs_) {
    lrs.push_back(base * (start_factor_ + (end_factor_ - start_factor_) * done / static_cast<double>(total_iters_)));
  }
  return lrs;
}

void LinearLR::save_state(nn::StateDict& out) const {
  out.insert("start_factor", ember::detail::optim::float_tensor(start_factor_));
  out.insert("end_factor", ember::detail::optim::float_tensor(end_factor_));
  out.insert("total_iters", ember::detail::optim::int_tensor(total_iters_));
}

void LinearLR::load_state(SchedulerStateReader& in, bool apply) {
  const double start = in.number("start_factor");
  const double end = in.number("end_factor");
  const int64_t total_iters = in.integer("total_iters");
  in.check(!in.has("start_factor") || !(start > 1.0 || start <= 0), cat("start_factor: ", kStartFactorMessage));
  in.check(!in.has("end_factor") || !(end > 1.0 || end < 0), cat("end_factor: ", kEndFactorMessage));
  if (apply) start_factor_ = start, end_factor_ = end, total_iters_ = total_iters;
}

}  // namespace ember::optim
