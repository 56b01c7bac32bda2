// Learning-rate schedulers: every scheduler's learning rates (and OneCycleLR's momenta)
// step by step against PyTorch's (tests/lr_scheduler_expected.h, from PyTorch 1.13, whose
// values for these cases are 2.x's too), over two parameter groups; state dicts saved
// mid-schedule with ember::save under a prefix and loaded into a fresh optimizer and
// scheduler, which then continue exactly as the uninterrupted ones; the load errors, which
// change nothing; and the argument checks with PyTorch 2.x's messages (where 1.13 differs,
// the test says so).
#include <gtest/gtest.h>

#include <unistd.h>
#include <cmath>
#include <filesystem>
#include <functional>
#include <memory>

#include "ember/ember.h"
#include "lr_scheduler_expected.h"
#include "test_support.h"

namespace ember {
namespace {

using ember::testing::error_of;
using namespace ember::lr_expected;
using Rows = std::vector<std::vector<double>>;

Tensor param(int64_t n) { return ones({n}, TensorOptions().requires_grad(true)); }

// Two groups, lr 0.1 and 0.05, as tests/lr_scheduler_expected.py makes them.
std::shared_ptr<optim::SGD> make_sgd(double momentum = 0.9) {
  auto opt = std::make_shared<optim::SGD>(std::vector<Tensor>{param(2)}, optim::SGDOptions(0.1).momentum(momentum));
  opt->add_param_group({param(3)}, optim::SGDOptions(0.05).momentum(momentum));
  return opt;
}

std::shared_ptr<optim::Adam> make_adam() {
  auto opt = std::make_shared<optim::Adam>(std::vector<Tensor>{param(2)}, optim::AdamOptions(0.1).betas({0.9, 0.99}));
  opt->add_param_group({param(3)}, optim::AdamOptions(0.05).betas({0.9, 0.99}));
  return opt;
}

// An optimizer and its scheduler (declared in this order, so the scheduler goes first).
struct Pair {
  std::shared_ptr<optim::Optimizer> opt;
  std::shared_ptr<optim::LRScheduler> sched;
};
using Make = std::function<Pair()>;

// One step of the schedule: step(), or ReduceLROnPlateau's step(metric) with the i-th metric.
void advance(const Pair& r, size_t i) {
  r.opt->step();
  if (auto* plateau = dynamic_cast<optim::ReduceLROnPlateau*>(r.sched.get())) {
    plateau->step(kPlateauMetrics.at(i));
  } else {
    r.sched->step();
  }
}

std::vector<double> momenta(const optim::Optimizer& opt) {
  std::vector<double> out;
  for (size_t g = 0; g < opt.num_param_groups(); ++g) out.push_back(opt.momentum(g));
  return out;
}

// get_last_lr() at construction and after each of rows - 1 steps (and the momenta).
Rows lrs_of(const Pair& r, size_t rows, Rows* moms = nullptr) {
  Rows out{r.sched->get_last_lr()};
  if (moms) *moms = {momenta(*r.opt)};
  for (size_t i = 0; i + 1 < rows; ++i) {
    advance(r, i);
    out.push_back(r.sched->get_last_lr());
    EXPECT_EQ(r.sched->last_epoch(), static_cast<int64_t>(i + 1));
    if (moms) moms->push_back(momenta(*r.opt));
  }
  return out;
}

// Equal to PyTorch's doubles within 4 ulps: the same operations in the same order, bitwise
// equal in the cpu preset's build; the margin only allows a compiler's fused multiply-add.
void expect_rows(const Rows& got, const Rows& expected) {
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].size(), expected[i].size()) << "row " << i;
    for (size_t g = 0; g < got[i].size(); ++g)
      EXPECT_DOUBLE_EQ(got[i][g], expected[i][g]) << "step " << i << " group " << g;
  }
}

template <class S, class... A>
Make sgd_with(double momentum, A... args) {
  return [=] {
    auto opt = make_sgd(momentum);
    return Pair{opt, std::make_shared<S>(*opt, args...)};
  };
}

double lambda0(int64_t e) { return std::pow(0.95, static_cast<double>(e)); }
double lambda1(int64_t e) { return 1 / static_cast<double>(e + 1); }

// The schedulers of tests/lr_scheduler_expected.py, with their expected rows.
struct Case {
  const char* name;
  Make make;
  const Rows* expected;
};

std::vector<Case> cases() {
  return {
      {"StepLR", sgd_with<optim::StepLR>(0.9, int64_t{3}, 0.5), &kStepLR},
      {"MultiStepLR", sgd_with<optim::MultiStepLR>(0.9, std::vector<int64_t>{3, 7, 7, 12}, 0.3), &kMultiStepLR},
      {"ExponentialLR", sgd_with<optim::ExponentialLR>(0.9, 0.9), &kExponentialLR},
      {"LambdaLR", sgd_with<optim::LambdaLR>(0.9, std::vector<optim::LambdaLR::Lambda>{lambda0, lambda1}), &kLambdaLR},
      {"CosineAnnealingLR", sgd_with<optim::CosineAnnealingLR>(0.9, int64_t{10}, 0.001), &kCosineAnnealingLR},
      {"LinearLR", sgd_with<optim::LinearLR>(0.9, 0.25, 1.0, int64_t{8}), &kLinearLR},
      {"LinearLRDown", sgd_with<optim::LinearLR>(0.9, 1.0, 0.1, int64_t{10}), &kLinearLRDown},
      {"OneCycleLR", sgd_with<optim::OneCycleLR>(0.9, std::vector<double>{0.4, 0.2}, int64_t{25}), &kOneCycleLR},
      {"OneCycleLRThreePhase",
       [] {
         auto opt = make_adam();
         auto options = optim::OneCycleLROptions()
                            .pct_start(0.25)
                            .anneal_strategy("linear")
                            .three_phase(true)
                            .div_factor(10)
                            .final_div_factor(100)
                            .base_momentum(0.8)
                            .max_momentum(0.9);
         return Pair{opt, std::make_shared<optim::OneCycleLR>(*opt, 0.3, 20, options)};
       },
       &kOneCycleLRThreePhase},
      {"OneCycleLRNoMomentum",
       sgd_with<optim::OneCycleLR>(0.9, 0.4, int64_t{10}, optim::OneCycleLROptions().cycle_momentum(false)),
       &kOneCycleLRNoMomentum},
      {"ReduceLROnPlateauMin",
       sgd_with<optim::ReduceLROnPlateau>(0.9, std::string("min"), 0.5, int64_t{2}, 0.05, std::string("abs"),
                                          int64_t{1}, std::vector<double>{0.01, 0.02}, 1e-8),
       &kReduceLROnPlateauMin},
      {"SequentialLR",
       [] {
         auto opt = make_sgd();
         auto a = std::make_shared<optim::LinearLR>(*opt, 0.1, 1.0, 4);
         auto b = std::make_shared<optim::ExponentialLR>(*opt, 0.9);
         return Pair{opt, std::make_shared<optim::SequentialLR>(
                              *opt, std::vector<std::shared_ptr<optim::LRScheduler>>{a, b}, std::vector<int64_t>{5})};
       },
       &kSequentialLR},
      {"SequentialLR3",
       [] {
         auto opt = make_sgd();
         std::vector<std::shared_ptr<optim::LRScheduler>> list{
             std::make_shared<optim::LinearLR>(*opt, 0.5, 1.0, 3), std::make_shared<optim::StepLR>(*opt, 3, 0.5),
             std::make_shared<optim::CosineAnnealingLR>(*opt, 6, 0.01)};
         return Pair{opt, std::make_shared<optim::SequentialLR>(*opt, list, std::vector<int64_t>{4, 10})};
       },
       &kSequentialLR3},
  };
}

TEST(LRScheduler, EachFollowsPyTorch) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    const Pair r = c.make();
    EXPECT_EQ(r.sched->last_epoch(), 0);
    expect_rows(lrs_of(r, c.expected->size()), *c.expected);
  }
}

TEST(LRScheduler, ReduceLROnPlateauMaxRelative) {
  auto opt = make_sgd();
  auto sched = std::make_shared<optim::ReduceLROnPlateau>(*opt, "max", 0.3, 1, 0.01, "rel", 0, 0.001, 1e-3);
  Rows got{sched->get_last_lr()};
  for (size_t i = 0; i + 1 < kReduceLROnPlateauMax.size(); ++i) {
    sched->step(-kPlateauMetrics[i]);
    got.push_back(sched->get_last_lr());
  }
  expect_rows(got, kReduceLROnPlateauMax);
}

TEST(LRScheduler, OneCycleLRCyclesMomentumAndBeta1) {
  Rows moms;
  lrs_of(sgd_with<optim::OneCycleLR>(0.9, std::vector<double>{0.4, 0.2}, int64_t{25})(), kOneCycleMomentum.size(),
         &moms);
  expect_rows(moms, kOneCycleMomentum);
  const Pair r = cases()[8].make();  // three phases, linear, Adam: beta1 cycles, beta2 stays
  lrs_of(r, kOneCycleBeta1.size(), &moms);
  expect_rows(moms, kOneCycleBeta1);
  EXPECT_EQ(static_cast<optim::Adam&>(*r.opt).options(1).betas().second, 0.99);
  const Pair off = cases()[9].make();
  lrs_of(off, 5);
  EXPECT_EQ(momenta(*off.opt), (std::vector<double>{0.9, 0.9}));  // cycle_momentum(false) leaves it
}

TEST(LRScheduler, InitialLrIsSetAsPyTorchSetsIt) {
  auto opt = make_sgd();
  EXPECT_FALSE(opt->initial_lr(0).has_value());
  EXPECT_FALSE(opt->state_dict().contains("param_groups.0.initial_lr"));
  optim::StepLR first(*opt, 2, 0.5);
  first.step();
  first.step();
  EXPECT_EQ(*opt->initial_lr(0), 0.1);  // setdefault: a second scheduler keeps it
  optim::ExponentialLR second(*opt, 0.5);
  EXPECT_EQ(*opt->initial_lr(1), 0.05);
  EXPECT_EQ(second.base_lrs(), (std::vector<double>{0.1, 0.05}));
  EXPECT_EQ(opt->state_dict()["param_groups.1.initial_lr"].item<double>(), 0.05);
  optim::OneCycleLR cycle(*opt, 1.0, 10);  // sets its own: max_lr / div_factor
  EXPECT_EQ(*opt->initial_lr(0), 1.0 / 25);
  // An optimizer checkpoint without initial_lr (made before any scheduler) still loads.
  auto plain = make_sgd();
  opt->load_state_dict(plain->state_dict());
  EXPECT_EQ(*opt->initial_lr(0), 1.0 / 25);
  plain->load_state_dict(opt->state_dict());
  EXPECT_EQ(*plain->initial_lr(1), 1.0 / 25);
  nn::StateDict bad = opt->state_dict();
  bad.insert("param_groups.1.initial_lr", full({}, -1.0, kFloat64));
  EXPECT_EQ(error_of<ValueError>([&] { plain->load_state_dict(bad); }),
            "Error(s) in loading state_dict for SGD:\n\tinvalid value for param_groups.1.initial_lr: expected one "
            "finite learning rate >= 0 (a 0-d tensor)");
  EXPECT_EQ(*plain->initial_lr(1), 1.0 / 25);
}

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("ember_lr_" + std::to_string(getpid()) + "_" + name + ".safetensors"))
      .string();
}

// Saves optimizer and scheduler after k steps in one file ("optimizer." and "scheduler."
// keys), loads them into a fresh pair, and steps both pairs on: identical lrs and momenta.
void round_trip(const Case& c, size_t k) {
  SCOPED_TRACE(c.name);
  const Pair a = c.make();
  for (size_t i = 0; i < k; ++i) advance(a, i);
  nn::StateDict checkpoint;
  for (const auto& [key, t] : a.opt->state_dict()) checkpoint.insert("optimizer." + key, t);
  for (const auto& [key, t] : a.sched->state_dict()) checkpoint.insert("scheduler." + key, t);
  const std::string file = temp_path(c.name);
  save(checkpoint, file);
  nn::StateDict opt_state, sched_state;
  for (const auto& [key, t] : load(file)) {
    if (key.rfind("optimizer.", 0) == 0) opt_state.insert(key.substr(10), t);
    if (key.rfind("scheduler.", 0) == 0) sched_state.insert(key.substr(10), t);
  }
  std::filesystem::remove(file);

  const Pair b = c.make();
  b.opt->load_state_dict(opt_state);
  b.sched->load_state_dict(sched_state);
  EXPECT_EQ(b.sched->last_epoch(), a.sched->last_epoch());
  EXPECT_EQ(b.sched->get_last_lr(), a.sched->get_last_lr());
  EXPECT_EQ(b.sched->state_dict().keys(), a.sched->state_dict().keys());
  for (size_t i = k; i + 1 < c.expected->size(); ++i) {
    advance(a, i);
    advance(b, i);
    ASSERT_EQ(b.sched->get_last_lr(), a.sched->get_last_lr()) << "step " << i + 1;
    ASSERT_EQ(b.opt->lr(1), a.opt->lr(1));
    ASSERT_EQ(momenta(*b.opt), momenta(*a.opt));
    ASSERT_EQ(b.sched->last_epoch(), a.sched->last_epoch());
  }
  EXPECT_EQ(a.sched->get_last_lr(), c.expected->back());
}

TEST(LRScheduler, StateDictRoundTripMidSchedule) {
  for (const Case& c : cases()) {
    round_trip(c, 3);
    round_trip(c, 7);  // past SequentialLR's first milestone, in the plateau's cooldown
  }
}

TEST(LRScheduler, StateDictKeysAndTypes) {
  const Pair r = cases()[0].make();
  r.sched->step();
  const nn::StateDict sd = r.sched->state_dict();
  EXPECT_EQ(sd.keys(),
            (std::vector<std::string>{"step_size", "gamma", "base_lrs", "last_epoch", "_step_count", "_last_lr"}));
  EXPECT_EQ(sd["step_size"].dtype(), kInt64);
  EXPECT_EQ(sd["gamma"].dtype(), kFloat64);
  EXPECT_EQ(sd["base_lrs"].to_vector<double>(), (std::vector<double>{0.1, 0.05}));
  EXPECT_EQ(sd["last_epoch"].item<int64_t>(), 1);
  EXPECT_EQ(sd["_step_count"].item<int64_t>(), 2);
  // Loading restores the hyper-parameters too (PyTorch's __dict__.update).
  auto opt = make_sgd();
  optim::StepLR other(*opt, 5, 0.9);
  other.load_state_dict(sd);
  opt->set_lr(0.1, 0);
  other.step();
  other.step();
  EXPECT_DOUBLE_EQ(other.get_last_lr()[0], 0.05);  // epoch 3: step_size 3, gamma 0.5
  // SequentialLR nests its schedulers; LambdaLR keeps no function; strings are bytes.
  const nn::StateDict seq = cases()[11].make().sched->state_dict();
  EXPECT_TRUE(seq.contains("_schedulers.0.start_factor"));
  EXPECT_TRUE(seq.contains("_schedulers.1.gamma"));
  EXPECT_EQ(seq["_milestones"].to_vector<int64_t>(), (std::vector<int64_t>{5}));
  EXPECT_EQ(cases()[3].make().sched->state_dict().keys(),
            (std::vector<std::string>{"base_lrs", "last_epoch", "_step_count", "_last_lr"}));
  const nn::StateDict plateau = cases()[10].make().sched->state_dict();
  EXPECT_EQ(plateau["mode"].dtype(), kUInt8);
  EXPECT_EQ(plateau["mode"].to_vector<uint8_t>(), (std::vector<uint8_t>{'m', 'i', 'n'}));
}

// A custom optimizer with neither momentum nor betas.
class Plain : public optim::Optimizer {
 public:
  explicit Plain(std::vector<Tensor> params) { add_group(std::move(params)); }
  double lr(size_t = 0) const override { return lr_; }
  void set_lr(double lr, size_t = 0) override { lr_ = lr; }

 protected:
  void update(size_t, const std::vector<Tensor>&, const std::vector<Tensor>&) override {}
  double lr_ = 0.1;
};

TEST(LRScheduler, ArgumentChecksAsPyTorch) {
  auto opt = make_sgd();
  using List = std::vector<std::shared_ptr<optim::LRScheduler>>;
  auto error = [](auto f) { return error_of<ValueError>(f); };
  // OneCycleLR, PyTorch 2.x's text (1.13 says "must by one of" and "must support momentum with").
  EXPECT_EQ(error([&] { optim::OneCycleLR(*opt, 0.1, 0); }), "Expected positive integer total_steps, but got 0");
  EXPECT_EQ(error([&] { optim::OneCycleLR(*opt, 0.1, 10, optim::OneCycleLROptions().pct_start(1.5)); }),
            "Expected float between 0 and 1 pct_start, but got 1.5");
  EXPECT_EQ(error([&] { optim::OneCycleLR(*opt, 0.1, 10, optim::OneCycleLROptions().anneal_strategy("cosine")); }),
            "anneal_strategy must be one of 'cos' or 'linear', instead got cosine");
  EXPECT_EQ(error([&] {
              optim::OneCycleLR(*opt, {0.1, 0.2, 0.3}, 10);
            }),
            "max_lr must have the same length as optimizer.param_groups. max_lr has 3 values, param_groups has 2.");
  EXPECT_EQ(error([&] {
              optim::OneCycleLR(*opt, 0.1, 10, optim::OneCycleLROptions().max_momentum({0.9, 0.9, 0.9}));
            }),
            "max_momentum must have the same length as optimizer.param_groups. max_momentum has 3 values, "
            "param_groups has 2.");
  Plain plain({param(2)});
  EXPECT_EQ(error([&] { optim::OneCycleLR(plain, 0.1, 10); }),
            "optimizer must support momentum or beta1 with `cycle_momentum` option enabled");
  EXPECT_FALSE(plain.initial_lr(0).has_value());  // PyTorch sets it before this check; ember checks first
  EXPECT_DOUBLE_EQ(optim::OneCycleLR(plain, 0.1, 10, optim::OneCycleLROptions().cycle_momentum(false)).get_last_lr()[0],
                   0.1 / 25);
  // LinearLR: 2.x refuses start_factor 0, which 1.13 accepts ("expected to be between 0 and 1").
  EXPECT_EQ(error([&] { optim::LinearLR(*opt, 0.0); }),
            "Starting multiplicative factor expected to be greater than 0 and less or equal to 1.");
  EXPECT_EQ(error([&] { optim::LinearLR(*opt, 0.5, 1.5); }),
            "Ending multiplicative factor expected to be between 0 and 1.");
  EXPECT_EQ(error([&] {
              optim::LambdaLR(*opt, std::vector<optim::LambdaLR::Lambda>{lambda0, lambda0, lambda1});
            }),
            "Expected 2 lr_lambdas, but got 3");
  // ReduceLROnPlateau.
  EXPECT_EQ(error([&] { optim::ReduceLROnPlateau(*opt, "min", 1.0); }), "Factor should be < 1.0.");
  EXPECT_EQ(error([&] { optim::ReduceLROnPlateau(*opt, "median"); }), "mode median is unknown!");
  EXPECT_EQ(error([&] { optim::ReduceLROnPlateau(*opt, "max", 0.1, 10, 1e-4, "relative"); }),
            "threshold mode relative is unknown!");
  EXPECT_EQ(error([&] {
              optim::ReduceLROnPlateau(*opt, "min", 0.1, 10, 1e-4, "rel", 0, {0.1, 0.2, 0.3});
            }),
            "expected 2 min_lrs, got 3");
  optim::ReduceLROnPlateau plateau(*opt);
  EXPECT_EQ(error_of<TypeError>([&] { static_cast<optim::LRScheduler&>(plateau).step(); }),
            "ReduceLROnPlateau.step() missing 1 required positional argument: 'metrics'");
  // SequentialLR, 2.x's checks (1.13 has only the optimizer and milestone ones).
  auto a = std::make_shared<optim::StepLR>(*opt, 2);
  auto b = std::make_shared<optim::ExponentialLR>(*opt, 0.9);
  EXPECT_EQ(error([&] {
              optim::SequentialLR(*opt, List{a, b}, {2, 4});
            }),
            "Sequential Schedulers expects number of schedulers provided to be one more than the number of milestone "
            "points, but got number of schedulers 2 and the number of milestones to be equal to 2");
  EXPECT_EQ(error([&] { optim::SequentialLR(*opt, List{}, {}); }),
            "SequentialLR expects at least one scheduler, but got no scheduler.");
  EXPECT_EQ(error([&] {
              optim::SequentialLR(*opt, List{a, std::make_shared<optim::ReduceLROnPlateau>(*opt)}, {2});
            }),
            "SequentialLR does not support `ReduceLROnPlateau` scheduler as it requires additional kwargs to be "
            "specified when calling `step`, but got one at index 1 in the given schedulers sequence.");
  auto other = make_sgd();
  EXPECT_EQ(error([&] {
              optim::SequentialLR(*opt, List{a, std::make_shared<optim::StepLR>(*other, 2)}, {2});
            }),
            "SequentialLR expects all schedulers to belong to the same optimizer, but got scheduler StepLR at index 1 "
            "with a different optimizer.");
  EXPECT_EQ(opt->lr(0), 0.1);  // none of the failed constructions moved a learning rate
  // The spellings of ../shared/api-next.md.
  optim::SequentialLR sequential(*opt, {a, b}, {2});
  optim::MultiStepLR multi(*opt, {30, 80}, 0.1);
  optim::LambdaLR lambda(*opt, [](int64_t epoch) { return 1.0 / static_cast<double>(epoch + 1); });
  lambda.step();
  EXPECT_EQ(lambda.get_last_lr(), (std::vector<double>{0.05, 0.025}));
}

TEST(LRScheduler, OneCycleLRPastTotalStepsChangesNothing) {
  auto opt = make_sgd();
  optim::OneCycleLR sched(*opt, 0.4, 3);
  for (int i = 0; i < 3; ++i) sched.step();
  const std::vector<double> lrs = sched.get_last_lr();
  // PyTorch 2.x's text (1.13 counts one more); PyTorch has moved last_epoch by then.
  EXPECT_EQ(error_of<ValueError>([&] { sched.step(); }),
            "Tried to step 4 times. The specified number of total steps is 3");
  EXPECT_EQ(sched.last_epoch(), 3);
  EXPECT_EQ(sched.get_last_lr(), lrs);
  EXPECT_EQ(opt->lr(0), lrs[0]);
}

void expect_same(const nn::StateDict& a, const nn::StateDict& b) {
  ASSERT_EQ(a.keys(), b.keys());
  for (const auto& [key, t] : a) EXPECT_TRUE(t.equal(b[key])) << key;
}

nn::StateDict with(nn::StateDict sd, const std::string& key, const Tensor& value) {
  sd.insert(key, value);
  return sd;
}

nn::StateDict without(const nn::StateDict& sd, const std::string& key) {
  nn::StateDict out;
  for (const auto& [k, t] : sd) {
    if (k != key) out.insert(k, t);
  }
  return out;
}

// Loading `bad` into `sched` fails with `message` and changes neither it nor the optimizer.
void expect_load_error(optim::LRScheduler& sched, const nn::StateDict& bad, const std::string& message) {
  const nn::StateDict before = sched.state_dict();
  const double lr = sched.optimizer().lr(0);
  EXPECT_EQ(error_of<ValueError>([&] { sched.load_state_dict(bad); }), message);
  expect_same(sched.state_dict(), before);
  EXPECT_EQ(sched.optimizer().lr(0), lr);
}

TEST(LRScheduler, LoadErrorsChangeNothing) {
  const std::string head = "Error(s) in loading state_dict for StepLR:\n\t";
  const Pair saved = cases()[0].make();
  saved.sched->step();
  const nn::StateDict sd = saved.sched->state_dict();
  const Pair target = cases()[0].make();
  for (int i = 0; i < 5; ++i) target.sched->step();
  optim::LRScheduler& t = *target.sched;
  expect_load_error(t, without(sd, "gamma"), head + "Missing key(s) in state_dict: \"gamma\". ");
  expect_load_error(t, with(sd, "foo", ones({1})), head + "Unexpected key(s) in state_dict: \"foo\". ");
  expect_load_error(t, with(sd, "last_epoch", full({}, 2.5, kFloat64)),
                    head + "invalid value for last_epoch: expected an integer (a 0-d integer tensor)");
  expect_load_error(t, with(sd, "base_lrs", tensor({0.1}, kFloat64)),
                    head + "invalid value for base_lrs: expected 2 values (one per parameter group), got 1");
  expect_load_error(t, with(sd, "step_size", full({}, 0, kInt64)), head + "invalid value for step_size: must not be 0");
  expect_load_error(t, cases()[2].make().sched->state_dict(), head + "Missing key(s) in state_dict: \"step_size\". ");
  expect_load_error(t, with(without(sd, "gamma"), "foo", ones({1})),
                    head + "Missing key(s) in state_dict: \"gamma\". \n\tUnexpected key(s) in state_dict: \"foo\". ");

  const Pair plateau = cases()[10].make();
  const nn::StateDict psd = plateau.sched->state_dict();
  Tensor median = tensor(std::vector<int64_t>{'m', 'e', 'd', 'i', 'a', 'n'}).to(kUInt8);
  expect_load_error(*plateau.sched, with(psd, "mode", median),
                    "Error(s) in loading state_dict for ReduceLROnPlateau:\n\tinvalid mode: mode median is unknown!");
  expect_load_error(
      *plateau.sched, with(psd, "factor", full({}, 1.0, kFloat64)),
      "Error(s) in loading state_dict for ReduceLROnPlateau:\n\tinvalid value for factor: Factor should be < 1.0.");
  const Pair linear = cases()[5].make();
  expect_load_error(*linear.sched, with(linear.sched->state_dict(), "start_factor", full({}, 0.0, kFloat64)),
                    "Error(s) in loading state_dict for LinearLR:\n\tstart_factor: Starting multiplicative factor "
                    "expected to be greater than 0 and less or equal to 1.");
  const Pair cycle = cases()[7].make();
  expect_load_error(*cycle.sched, with(cycle.sched->state_dict(), "_anneal_func_type", median),
                    "Error(s) in loading state_dict for OneCycleLR:\n\tinvalid value for _anneal_func_type: expected "
                    "'cos' or 'linear', got 'median'");
  // SequentialLR: a problem in one scheduler's entries leaves every scheduler as it was.
  const Pair seq = cases()[11].make();
  for (int i = 0; i < 7; ++i) seq.sched->step();
  const auto& children = static_cast<optim::SequentialLR&>(*seq.sched).schedulers();
  const nn::StateDict first = children[0]->state_dict();
  expect_load_error(*seq.sched, without(cases()[11].make().sched->state_dict(), "_schedulers.1.gamma"),
                    "Error(s) in loading state_dict for SequentialLR:\n\tin _schedulers.1.: Missing key(s) in "
                    "state_dict: \"gamma\". ");
  expect_same(children[0]->state_dict(), first);
}

}  // namespace
}  // namespace ember
