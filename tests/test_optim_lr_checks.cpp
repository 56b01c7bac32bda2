// Optimizers refuse a non-finite learning rate wherever one is set (issue 34, item 9): the
// options at construction and in add_param_group, set_lr (what schedulers call), options()
// changed by hand (checked at step(), before any group is updated), load_state_dict and
// initial_lr. PyTorch refuses lr < 0 and NaN with "Invalid learning rate: ..." and accepts
// inf, which one step turns the parameters into -inf; ember refuses inf with the same text.
// Every refusal changes nothing.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>

#include "ember/ember.h"
#include "test_support.h"

namespace ember {
namespace {

using ember::testing::error_of;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

Tensor param(int64_t n) { return ones({n}, TensorOptions().requires_grad(true)); }

std::vector<float> values(const Tensor& t) { return t.to_vector<float>(); }

TEST(OptimLrChecks, ConstructionAndParamGroupsRefuseNonFinite) {
  EXPECT_EQ(error_of<ValueError>([] { optim::SGD({param(2)}, optim::SGDOptions(kInf)); }),
            "Invalid learning rate: inf");
  EXPECT_EQ(error_of<ValueError>([] { optim::SGD({param(2)}, optim::SGDOptions(-kInf)); }),
            "Invalid learning rate: -inf");
  EXPECT_EQ(error_of<ValueError>([] { optim::SGD({param(2)}, optim::SGDOptions(kNaN)); }),
            "Invalid learning rate: nan");
  EXPECT_EQ(error_of<ValueError>([] { optim::Adam({param(2)}, optim::AdamOptions(kInf)); }),
            "Invalid learning rate: inf");
  EXPECT_EQ(error_of<ValueError>([] { optim::AdamW({param(2)}, optim::AdamWOptions(kInf)); }),
            "Invalid learning rate: inf");
  optim::SGD sgd({param(2)}, optim::SGDOptions(0.1));
  EXPECT_EQ(error_of<ValueError>([&] { sgd.add_param_group({param(3)}, optim::SGDOptions(kInf)); }),
            "Invalid learning rate: inf");
  optim::AdamW adamw({param(2)}, optim::AdamWOptions(0.1));
  EXPECT_EQ(error_of<ValueError>([&] { adamw.add_param_group({param(3)}, optim::AdamWOptions(kInf)); }),
            "Invalid learning rate: inf");
  EXPECT_EQ(sgd.num_param_groups(), 1u);
  EXPECT_EQ(adamw.num_param_groups(), 1u);
}

TEST(OptimLrChecks, SetLrRefusesNonFinite) {
  optim::SGD sgd({param(2)}, optim::SGDOptions(0.1));
  optim::Adam adam({param(2)}, optim::AdamOptions(0.1));
  optim::AdamW adamw({param(2)}, optim::AdamWOptions(0.1));
  for (optim::Optimizer* opt : std::vector<optim::Optimizer*>{&sgd, &adam, &adamw}) {
    EXPECT_EQ(error_of<ValueError>([&] { opt->set_lr(kInf); }), "Invalid learning rate: inf");
    EXPECT_EQ(error_of<ValueError>([&] { opt->set_lr(kNaN); }), "Invalid learning rate: nan");
    EXPECT_EQ(opt->lr(), 0.1);
    EXPECT_EQ(error_of<ValueError>([&] { opt->set_initial_lr(kInf); }), "Invalid initial_lr: inf");
    EXPECT_FALSE(opt->initial_lr().has_value());
  }
}

TEST(OptimLrChecks, StepChecksEveryGroupBeforeUpdatingAny) {
  // options() may be changed by hand: the step refuses, and group 0 is not updated first.
  auto p = param(2), q = param(3);
  optim::Adam adam({p}, optim::AdamOptions(0.1));
  adam.add_param_group({q}, optim::AdamOptions(0.1));
  p.mutable_grad() = ones({2});
  q.mutable_grad() = ones({3});
  adam.options(1).lr(kInf);
  EXPECT_EQ(error_of<ValueError>([&] { adam.step(); }), "Invalid learning rate: inf");
  EXPECT_EQ(values(p), (std::vector<float>{1, 1}));
  EXPECT_EQ(values(q), (std::vector<float>{1, 1, 1}));
  adam.options(1).lr(0.1);
  adam.step();
  EXPECT_TRUE(adam.state_dict().contains("state.0.exp_avg"));
}

TEST(OptimLrChecks, LoadStateDictRefusesNonFinite) {
  optim::SGD sgd({param(2)}, optim::SGDOptions(0.1));
  nn::StateDict sd = sgd.state_dict();
  sd.insert("param_groups.0.lr", full({}, kInf, kFloat64));
  EXPECT_EQ(error_of<ValueError>([&] { sgd.load_state_dict(sd); }),
            "Error(s) in loading state_dict for SGD:\n\tparameter group 0: Invalid learning rate: inf");
  EXPECT_EQ(sgd.lr(), 0.1);
  optim::Adam adam({param(2)}, optim::AdamOptions(0.1));
  nn::StateDict asd = adam.state_dict();
  asd.insert("param_groups.0.lr", full({}, kNaN, kFloat64));
  EXPECT_EQ(error_of<ValueError>([&] { adam.load_state_dict(asd); }),
            "Error(s) in loading state_dict for Adam:\n\tparameter group 0: Invalid learning rate: nan");
  EXPECT_EQ(adam.lr(), 0.1);
}

// An optimizer of the user's, whose set_lr checks nothing: the base class's load refuses.
class Plain : public optim::Optimizer {
 public:
  explicit Plain(std::vector<Tensor> params) { add_group(std::move(params)); }
  double lr(size_t = 0) const override { return lr_; }
  void set_lr(double lr, size_t = 0) override { lr_ = lr; }

 protected:
  void update(size_t, const std::vector<Tensor>&, const std::vector<Tensor>&) override {}
  double lr_ = 0.1;
};

TEST(OptimLrChecks, BaseLoadOfACustomOptimizerRefusesNonFinite) {
  Plain plain({param(2)});
  nn::StateDict sd = plain.state_dict();
  sd.insert("param_groups.0.lr", full({}, kInf, kFloat64));
  EXPECT_EQ(error_of<ValueError>([&] { plain.load_state_dict(sd); }),
            "Error(s) in loading state_dict for Optimizer:\n\tparameter group 0: Invalid learning rate: inf");
  EXPECT_EQ(plain.lr(), 0.1);
}

}  // namespace
}  // namespace ember
