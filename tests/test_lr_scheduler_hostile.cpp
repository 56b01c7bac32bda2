// Learning-rate schedulers under hostile arguments and state dicts (issue 34, items 3, 9, 19
// and 20): integers at the int64 edges, in the constructors and through load_state_dict,
// compute as Python's unbounded ints do or are refused, never overflow; no scheduler ever
// hands the optimizer a non-finite learning rate, and a refused construction or step changes
// nothing. Expected values are PyTorch 1.13's (/usr/bin/python3), which 2.x's code for these
// cases equals; messages are 2.x's where it has one (where 1.13 differs, the test says so).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>

#include "ember/ember.h"
#include "test_support.h"

namespace ember {
namespace {

using ember::testing::error_of;
using List = std::vector<std::shared_ptr<optim::LRScheduler>>;

constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

Tensor param(int64_t n) { return ones({n}, TensorOptions().requires_grad(true)); }

// Two groups, lr 0.1 and 0.05, momentum 0.9 (as tests/lr_scheduler_expected.py).
std::shared_ptr<optim::SGD> make_sgd() {
  auto opt = std::make_shared<optim::SGD>(std::vector<Tensor>{param(2)}, optim::SGDOptions(0.1).momentum(0.9));
  opt->add_param_group({param(3)}, optim::SGDOptions(0.05).momentum(0.9));
  return opt;
}

nn::StateDict with(nn::StateDict sd, const std::string& key, const Tensor& value) {
  sd.insert(key, value);
  return sd;
}
Tensor int_value(int64_t v) { return full({}, v, TensorOptions(kInt64)); }

void expect_same(const nn::StateDict& a, const nn::StateDict& b) {
  ASSERT_EQ(a.keys(), b.keys());
  for (const auto& [key, t] : a) EXPECT_TRUE(t.equal(b[key])) << key;
}

// `f` (a step or a load) fails with a ValueError saying `message` and changes neither the
// scheduler nor the optimizer's learning rates and momenta.
template <typename F>
void expect_refused(optim::LRScheduler& sched, F&& f, const std::string& message) {
  const nn::StateDict before = sched.state_dict();
  const nn::StateDict opt_before = sched.optimizer().state_dict();
  EXPECT_EQ(error_of<ValueError>(f), message);
  expect_same(sched.state_dict(), before);
  expect_same(sched.optimizer().state_dict(), opt_before);
}

// ---- Item 3: CosineAnnealingLR's T_max = INT64_MIN (SIGFPE: 2 * T_max wrapped to 0).

TEST(LRSchedulerHostile, CosineAnnealingTMaxInt64MinStepsAsPython) {
  auto opt = make_sgd();
  optim::CosineAnnealingLR sched(*opt, kMin, 0.001);
  for (int i = 0; i < 4; ++i) sched.step();
  // PyTorch: cos(pi * e / T_max) is 1.0 to the last bit, so the lr stays.
  EXPECT_EQ(sched.get_last_lr(), (std::vector<double>{0.1, 0.05}));
  EXPECT_EQ(sched.last_epoch(), 4);
}

TEST(LRSchedulerHostile, CosineAnnealingTMaxInt64MinThroughLoadStateDict) {
  auto opt = make_sgd();
  optim::CosineAnnealingLR sched(*opt, 10, 0.001);
  sched.step();
  sched.step();
  sched.load_state_dict(with(sched.state_dict(), "T_max", int_value(kMin)));
  for (int i = 0; i < 3; ++i) sched.step();
  // PyTorch 1.13: 0.0905463412215599, 0.045320916362186214 (the epoch-2 values) stay.
  EXPECT_DOUBLE_EQ(sched.get_last_lr()[0], 0.0905463412215599);
  EXPECT_DOUBLE_EQ(sched.get_last_lr()[1], 0.045320916362186214);
  // last_epoch - 1 - T_max below INT64_MIN: Python's (e - 1 - T_max) % 6 is 2, and the
  // ratio of cosines of e and e - 1 (equal as doubles) is 1.
  sched.load_state_dict(with(with(sched.state_dict(), "T_max", int_value(3)), "last_epoch", int_value(kMin + 1)));
  sched.step();
  EXPECT_EQ(sched.last_epoch(), kMin + 2);
  EXPECT_DOUBLE_EQ(sched.get_last_lr()[0], 0.0905463412215599);
  // T_max INT64_MAX at last_epoch INT64_MIN + 1: 1 + cos(pi * e / T_max) is 0 (PyTorch:
  // ZeroDivisionError), refused with nothing changed.
  sched.load_state_dict(with(with(sched.state_dict(), "T_max", int_value(kMax)), "last_epoch", int_value(kMin)));
  expect_refused(
      sched, [&] { sched.step(); },
      "CosineAnnealingLR: the learning rate of param group 0 would become nan at epoch "
      "-9223372036854775807 (a scheduler never sets a non-finite learning rate; nothing was changed)");
}

TEST(LRSchedulerHostile, StepLRIntegerEdgesDoNotOverflow) {
  // step_size -1 (accepted by PyTorch 2.x) beside last_epoch INT64_MIN: computed as Python's
  // % and //, without int64's trap at INT64_MIN % -1.
  auto opt = make_sgd();
  optim::StepLR sched(*opt, -1, 0.5);
  sched.load_state_dict(with(sched.state_dict(), "last_epoch", int_value(kMin)));
  sched.step();
  EXPECT_EQ(sched.last_epoch(), kMin + 1);
  EXPECT_DOUBLE_EQ(sched.get_last_lr()[0], 0.05);  // (INT64_MIN + 1) % -1 == 0: decays
  auto first = std::make_shared<optim::ExponentialLR>(*opt, 1.0);
  auto second = std::make_shared<optim::StepLR>(*opt, -1, 1.0);
  optim::SequentialLR seq(*opt, List{first, second}, {1});
  seq.step();  // the restart uses the closed form, 0 // -1
  EXPECT_EQ(seq.last_epoch(), 1);
}

TEST(LRSchedulerHostile, LastEpochAtInt64MaxIsRefusedNotWrapped) {
  auto opt = make_sgd();
  std::vector<std::shared_ptr<optim::LRScheduler>> all{
      std::make_shared<optim::StepLR>(*opt, 3, 0.5),
      std::make_shared<optim::MultiStepLR>(*opt, std::vector<int64_t>{2, kMax}, 0.5),
      std::make_shared<optim::ExponentialLR>(*opt, 0.9),
      std::make_shared<optim::LambdaLR>(*opt, [](int64_t) { return 1.0; }),
      std::make_shared<optim::CosineAnnealingLR>(*opt, 10),
      std::make_shared<optim::LinearLR>(*opt, 0.5, 1.0, kMax),
  };
  for (const auto& sched : all) {
    SCOPED_TRACE(sched->type_name());
    sched->load_state_dict(with(sched->state_dict(), "last_epoch", int_value(kMax)));
    expect_refused(
        *sched, [&] { sched->step(); },
        std::string(sched->type_name()) + ": cannot step: last_epoch is 9223372036854775807, the largest int64");
    sched->load_state_dict(with(with(sched->state_dict(), "last_epoch", int_value(0)), "_step_count", int_value(kMax)));
    expect_refused(
        *sched, [&] { sched->step(); },
        std::string(sched->type_name()) + ": cannot step: _step_count is 9223372036854775807, the largest int64");
  }
  auto a = std::make_shared<optim::StepLR>(*opt, 3, 0.5);
  auto b = std::make_shared<optim::ExponentialLR>(*opt, 0.9);
  optim::SequentialLR seq(*opt, List{a, b}, {2});
  seq.load_state_dict(with(seq.state_dict(), "last_epoch", int_value(kMax)));
  expect_refused(
      seq, [&] { seq.step(); }, "SequentialLR: cannot step: last_epoch is 9223372036854775807, the largest int64");
  optim::ReduceLROnPlateau plateau(*opt);
  plateau.load_state_dict(with(plateau.state_dict(), "last_epoch", int_value(kMax)));
  expect_refused(
      plateau, [&] { plateau.step(1.0); },
      "ReduceLROnPlateau: cannot step: last_epoch is 9223372036854775807, the largest int64");
}

TEST(LRSchedulerHostile, SequentialLRRefusesToUndoAnInt64MinEpoch) {
  auto opt = make_sgd();
  auto a = std::make_shared<optim::StepLR>(*opt, 3, 0.5);
  auto b = std::make_shared<optim::ExponentialLR>(*opt, 0.9);
  b->load_state_dict(with(b->state_dict(), "last_epoch", int_value(kMin)));
  EXPECT_EQ(error_of<ValueError>([&] {
              optim::SequentialLR(*opt, List{a, b}, {2});
            }),
            "SequentialLR: cannot undo the ExponentialLR's initial step: its last_epoch is -9223372036854775808, the "
            "smallest int64");
  EXPECT_EQ(a->last_epoch(), 0);
  // Unsorted milestones from a state dict: Python's bisect_right, no undefined behaviour.
  b->load_state_dict(with(b->state_dict(), "last_epoch", int_value(0)));
  optim::SequentialLR seq(*opt, List{a, b, std::make_shared<optim::StepLR>(*opt, 2)}, {2, 4});
  seq.load_state_dict(with(seq.state_dict(), "_milestones", tensor(std::vector<int64_t>{9, 1})));
  for (int i = 0; i < 4; ++i) seq.step();
  EXPECT_EQ(seq.last_epoch(), 4);
}

TEST(LRSchedulerHostile, ReduceLROnPlateauCountersAtInt64Max) {
  // num_bad_epochs INT64_MAX, patience INT64_MAX: Python's count reaches 2^63 > patience
  // and reduces; an int64 one would wrap to INT64_MIN and never reduce.
  auto opt = make_sgd();
  optim::ReduceLROnPlateau sched(*opt, "min", 0.5, 10);
  sched.step(1.0);
  nn::StateDict sd = sched.state_dict();
  sched.load_state_dict(with(with(sd, "num_bad_epochs", int_value(kMax)), "patience", int_value(kMax)));
  sched.step(2.0);
  EXPECT_EQ(sched.get_last_lr(), (std::vector<double>{0.05, 0.025}));
  EXPECT_EQ(sched.num_bad_epochs(), 0);
}

// ---- Item 9: OneCycleLR never hands out a non-finite learning rate; nor does any scheduler.

// The optimizer as make_sgd() made it: no initial_lr, lr and momentum untouched.
void expect_untouched(const optim::SGD& opt) {
  EXPECT_FALSE(opt.initial_lr(0).has_value());
  EXPECT_EQ(opt.lr(0), 0.1);
  EXPECT_EQ(opt.lr(1), 0.05);
  EXPECT_EQ(opt.momentum(0), 0.9);
}

TEST(LRSchedulerHostile, OneCycleLRZeroLengthPhaseIsRefusedAtConstruction) {
  // PyTorch: ZeroDivisionError: float division by zero, from the initial step.
  auto opt = make_sgd();
  EXPECT_EQ(error_of<ValueError>([&] { optim::OneCycleLR(*opt, 0.1, 10, optim::OneCycleLROptions().pct_start(0.1)); }),
            "OneCycleLR: step 0 falls in phase 1 of 2, which starts and ends at step 0.0 (float division by zero)");
  expect_untouched(*opt);
  EXPECT_EQ(error_of<ValueError>(
                [&] { optim::OneCycleLR(*opt, 0.1, 4, optim::OneCycleLROptions().pct_start(0.25).three_phase(true)); }),
            "OneCycleLR: step 0 falls in phase 1 of 3, which starts and ends at step 0.0 (float division by zero)");
  expect_untouched(*opt);
  // pct_start 1: the second phase has no length; PyTorch fails at the step that reaches it
  // (total_steps), and so does ember, changing nothing.
  optim::OneCycleLR last(*opt, 0.1, 4, optim::OneCycleLROptions().pct_start(1.0));
  for (int i = 0; i < 3; ++i) last.step();
  expect_refused(
      last, [&] { last.step(); },
      "OneCycleLR: step 4 falls in phase 2 of 2, which starts and ends at step 3.0 (float division by zero)");
}

TEST(LRSchedulerHostile, OneCycleLRDivFactorsAreChecked) {
  auto opt = make_sgd();
  auto make = [&](optim::OneCycleLROptions o) {
    return error_of<ValueError>([&] { optim::OneCycleLR(*opt, 0.1, 10, o); });
  };
  EXPECT_EQ(make(optim::OneCycleLROptions().div_factor(0)),
            "OneCycleLR: div_factor must not be 0 (float division by zero)");
  EXPECT_EQ(make(optim::OneCycleLROptions().final_div_factor(0)),
            "OneCycleLR: final_div_factor must not be 0 (float division by zero)");
  EXPECT_EQ(make(optim::OneCycleLROptions().div_factor(1e-310)),
            "OneCycleLR: the learning rates of the cycle must be finite, but param group 0 has max_lr 0.1, initial_lr "
            "(max_lr / div_factor) inf and min_lr (initial_lr / final_div_factor) inf");
  EXPECT_EQ(error_of<ValueError>([&] {
              optim::OneCycleLR(*opt, {0.1, kNaN}, 10);
            }),
            "OneCycleLR: the learning rates of the cycle must be finite, but param group 1 has max_lr nan, initial_lr "
            "(max_lr / div_factor) nan and min_lr (initial_lr / final_div_factor) nan");
  EXPECT_EQ(
      error_of<ValueError>([&] { optim::OneCycleLR(*opt, 0.1, 10, optim::OneCycleLROptions().max_momentum(kInf)); }),
      "OneCycleLR: the momentum of param group 0 would become inf at epoch 0 (a scheduler never sets a non-finite "
      "momentum; nothing was changed)");
  expect_untouched(*opt);
  // The weights after an optimizer step stay finite (with div_factor 0 they were -inf).
  Tensor w = opt->params(0)[0];
  w.mutable_grad() = ones({2});
  opt->step();
  for (float v : w.to_vector<float>()) EXPECT_TRUE(std::isfinite(v)) << v;
}

TEST(LRSchedulerHostile, OneCycleLRLoadRefusesABrokenSchedule) {
  auto opt = make_sgd();
  optim::OneCycleLR sched(*opt, 0.4, 10);
  const nn::StateDict sd = sched.state_dict();
  const std::string head = "Error(s) in loading state_dict for OneCycleLR:\n\t";
  const std::string phases =
      "invalid value for _schedule_phases.end_step: expected 2 or 3 finite end steps, the last total_steps - 1";
  expect_refused(
      sched,
      [&] {
        sched.load_state_dict(with(sd, "_schedule_phases.end_step", tensor({0.0, 0.0}, kFloat64)));
      },
      head + phases);
  expect_refused(
      sched,
      [&] {
        sched.load_state_dict(with(sd, "_schedule_phases.end_step", tensor({kNaN, 9.0}, kFloat64)));
      },
      head + phases);
  expect_refused(
      sched,
      [&] {
        sched.load_state_dict(with(sd, "max_lrs", tensor({kInf, 0.4}, kFloat64)));
      },
      head + "invalid value for max_lrs or min_lrs: expected finite numbers");
  expect_refused(
      sched,
      [&] {
        sched.load_state_dict(with(sd, "base_lrs", tensor({0.1, kNaN}, kFloat64)));
      },
      head + "invalid value for base_lrs: expected finite numbers");
  // A loaded schedule whose phase has no length fails at the step that reaches it.
  nn::StateDict one =
      with(with(sd, "total_steps", int_value(1)), "_schedule_phases.end_step", tensor({0.0, 0.0}, kFloat64));
  sched.load_state_dict(one);
  expect_refused(
      sched, [&] { sched.step(); },
      "OneCycleLR: step 1 falls in phase 2 of 2, which starts and ends at step 0.0 (float division by zero)");
}

TEST(LRSchedulerHostile, NoSchedulerSetsANonFiniteLearningRate) {
  auto opt = make_sgd();
  optim::ExponentialLR exp(*opt, 1e200);
  exp.step();
  expect_refused(
      exp, [&] { exp.step(); },
      "ExponentialLR: the learning rate of param group 0 would become inf at epoch 2 (a scheduler never sets "
      "a non-finite learning rate; nothing was changed)");
  EXPECT_EQ(exp.last_epoch(), 1);

  // At construction: PyTorch 2.x's check lets start_factor NaN through; the optimizer
  // keeps no initial_lr from the refused scheduler.
  auto fresh = make_sgd();
  EXPECT_EQ(error_of<ValueError>([&] { optim::LinearLR(*fresh, kNaN); }),
            "LinearLR: the learning rate of param group 0 would become nan at epoch 0 (a scheduler never sets a "
            "non-finite learning rate; nothing was changed)");
  expect_untouched(*fresh);

  auto opt2 = make_sgd();
  optim::LambdaLR lambda(*opt2, [](int64_t e) { return e == 2 ? kNaN : 1.0; });
  lambda.step();
  expect_refused(
      lambda, [&] { lambda.step(); },
      "LambdaLR: the learning rate of param group 0 would become nan at epoch 2 (a scheduler never sets a "
      "non-finite learning rate; nothing was changed)");

  // LinearLR with total_iters 0, restarted by SequentialLR through its closed form: 0 / 0
  // (PyTorch's ZeroDivisionError).
  auto opt3 = make_sgd();
  auto a = std::make_shared<optim::ExponentialLR>(*opt3, 0.9);
  auto b = std::make_shared<optim::LinearLR>(*opt3, 0.5, 1.0, 0);
  optim::SequentialLR seq(*opt3, List{a, b}, {1});
  expect_refused(
      seq, [&] { seq.step(); },
      "LinearLR: the learning rate of param group 0 would become nan at epoch 0 (a scheduler never sets a "
      "non-finite learning rate; nothing was changed)");
  EXPECT_EQ(seq.last_epoch(), 0);

  // ReduceLROnPlateau: factor -inf and min_lr -inf would reduce to -inf.
  auto opt4 = make_sgd();
  optim::ReduceLROnPlateau plateau(*opt4, "min", -kInf, 0, 1e-4, "rel", 0, -kInf);
  plateau.step(1.0);
  expect_refused(
      plateau, [&] { plateau.step(2.0); },
      "ReduceLROnPlateau: the learning rate of param group 0 would become -inf at epoch 2 (a scheduler "
      "never sets a non-finite learning rate; nothing was changed)");
}

// ---- Item 19: StepLR's negative step_size and ReduceLROnPlateau's factor NaN, as PyTorch 2.x.

TEST(LRSchedulerHostile, StepLRNegativeStepSizeAsPyTorch) {
  // PyTorch 2.x (no check; Python's %): decays every 3 epochs. 1.13's values, the same code.
  auto opt = make_sgd();
  optim::StepLR sched(*opt, -3, 0.5);
  const std::vector<std::vector<double>> expected = {{0.1, 0.05},   {0.1, 0.05},   {0.1, 0.05},     {0.05, 0.025},
                                                     {0.05, 0.025}, {0.05, 0.025}, {0.025, 0.0125}, {0.025, 0.0125}};
  EXPECT_EQ(sched.get_last_lr(), expected[0]);
  for (size_t i = 1; i < expected.size(); ++i) {
    sched.step();
    EXPECT_EQ(sched.get_last_lr(), expected[i]) << "epoch " << i;
  }
  // 0 can never step (PyTorch: ZeroDivisionError: integer modulo by zero at the first step).
  EXPECT_EQ(error_of<ValueError>([&] { optim::StepLR(*opt, 0); }),
            "StepLR: step_size must not be 0 (integer modulo by zero)");
  expect_refused(
      sched, [&] { sched.load_state_dict(with(sched.state_dict(), "step_size", int_value(0))); },
      "Error(s) in loading state_dict for StepLR:\n\tinvalid value for step_size: must not be 0");
  sched.load_state_dict(with(sched.state_dict(), "step_size", int_value(-2)));
}

TEST(LRSchedulerHostile, ReduceLROnPlateauFactorNaNAsPyTorch) {
  // PyTorch 2.x checks `factor >= 1.0`, which NaN passes; max(lr * nan, min_lr) is nan and
  // `lr - nan > eps` is false, so nothing is ever reduced (1.13: the same values).
  auto opt = make_sgd();
  optim::ReduceLROnPlateau sched(*opt, "min", kNaN, 0);
  for (double metric : {1.0, 2.0, 3.0, 4.0}) sched.step(metric);
  EXPECT_EQ(sched.get_last_lr(), (std::vector<double>{0.1, 0.05}));
  EXPECT_EQ(sched.last_epoch(), 4);
  sched.load_state_dict(sched.state_dict());  // and it loads back
  EXPECT_EQ(error_of<ValueError>([&] { optim::ReduceLROnPlateau(*opt, "min", kInf); }), "Factor should be < 1.0.");
}

// ---- Item 20: OneCycleLR's count past the end, at the int64 edge.

TEST(LRSchedulerHostile, OneCycleLRPastTheEndCountsWithoutOverflow) {
  auto opt = make_sgd();
  optim::OneCycleLR sched(*opt, 0.4, 3);
  // PyTorch 2.x counts the step it refuses: "Tried to step {last_epoch}" after moving it
  // (pytorch#92040; 1.13 printed one more). After a load of INT64_MAX that is 2^63.
  sched.load_state_dict(with(sched.state_dict(), "last_epoch", int_value(kMax)));
  expect_refused(
      sched, [&] { sched.step(); },
      "Tried to step 9223372036854775808 times. The specified number of total steps is 3");
  sched.load_state_dict(with(with(sched.state_dict(), "total_steps", int_value(kMax)), "_schedule_phases.end_step",
                             tensor({1.0, 9223372036854775806.0}, kFloat64)));
  expect_refused(
      sched, [&] { sched.step(); },
      "Tried to step 9223372036854775808 times. The specified number of total steps is 9223372036854775807");
}

}  // namespace
}  // namespace ember
