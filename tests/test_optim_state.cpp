// Optimizer state dicts (PyTorch's optimizer.state_dict()/load_state_dict(), flattened to
// names -> tensors): the keys, a round trip through ember::save/load that continues with
// bitwise the same steps as an optimizer that was never interrupted, and the errors, which
// leave the optimizer as it was; on the cpu and on a cuda device. The group errors are
// PyTorch 1.13's text (torch/optim/optimizer.py).
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>

#include "ember/ember.h"
#include "test_support.h"

namespace ember {
namespace {

using ember::testing::error_of;

// Three parameters in two groups, and one that never gets a gradient (so has no state).
struct Params {
  std::vector<Tensor> group0, group1;
  std::vector<Tensor> all() const {
    std::vector<Tensor> out = group0;
    out.insert(out.end(), group1.begin(), group1.end());
    return out;
  }
};

Params make_params(Device device, DType dtype = kFloat32) {
  auto p = [&](const TensorData& d) { return tensor(d, TensorOptions(dtype).device(device).requires_grad(true)); };
  Params ps;
  ps.group0 = {p({{0.5, -1.25, 2.0}, {0.75, 1.5, -0.5}}), p({1.5, -0.75})};
  ps.group1 = {p({0.25, 0.125, -2.0}), p({3.0})};
  return ps;
}

// Copies of the parameters' current values, as fresh leaves.
Params copy_of(const Params& ps) {
  Params out;
  for (const Tensor& t : ps.group0) out.group0.push_back(t.detach().clone().requires_grad_(true));
  for (const Tensor& t : ps.group1) out.group1.push_back(t.detach().clone().requires_grad_(true));
  return out;
}

// Step k's gradients (the last parameter never gets one).
void set_grads(const Params& ps, int k) {
  const std::vector<Tensor> all = ps.all();
  for (size_t i = 0; i + 1 < all.size(); ++i) {
    NoGradGuard no_grad;
    all[i].mutable_grad() = all[i].detach() * (0.5 + 0.1 * static_cast<double>(i)) + (0.3 - 0.2 * k);
  }
}

void run(optim::Optimizer& opt, const Params& ps, int first, int steps) {
  for (int k = first; k < first + steps; ++k) {
    set_grads(ps, k);
    opt.step();
  }
}

std::vector<double> values(const Tensor& t) { return t.to(kFloat64).cpu().to_vector<double>(); }

using Factory = std::function<std::unique_ptr<optim::Optimizer>(const Params&, double lr)>;

std::unique_ptr<optim::Optimizer> make_sgd(const Params& ps, double lr) {
  auto opt = std::make_unique<optim::SGD>(ps.group0, optim::SGDOptions(lr).momentum(0.9).dampening(0.1));
  opt->add_param_group(ps.group1, optim::SGDOptions(lr / 2).momentum(0.8).nesterov(true).weight_decay(0.01));
  return opt;
}
std::unique_ptr<optim::Optimizer> make_adam(const Params& ps, double lr) {
  auto opt = std::make_unique<optim::Adam>(ps.group0, optim::AdamOptions(lr).betas({0.8, 0.99}));
  opt->add_param_group(ps.group1, optim::AdamOptions(lr / 2).weight_decay(0.1).eps(1e-6));
  return opt;
}
std::unique_ptr<optim::Optimizer> make_adamw(const Params& ps, double lr) {
  auto opt = std::make_unique<optim::AdamW>(ps.group0, optim::AdamWOptions(lr));
  opt->add_param_group(ps.group1, optim::AdamWOptions(lr / 2).maximize(true));
  return opt;
}

class OptimState : public ember::testing::OnDevice {
 protected:
  std::string path(const std::string& name) const {
    return (std::filesystem::path(::testing::TempDir()) /
            ("ember_optim_state_" + name + "_" + std::to_string(dev_.is_cuda() ? dev_.index() : -1) + ".safetensors"))
        .string();
  }

  // Runs `make` for 2 steps, saves, loads into a fresh optimizer (made with another lr)
  // over copies of the parameters, runs both 3 more steps: the parameters agree bitwise.
  void round_trip(const Factory& make, const std::string& name) {
    Params ps = make_params(dev_);
    auto opt = make(ps, 0.05);
    run(*opt, ps, 0, 2);
    const std::string file = path(name);
    save(opt->state_dict(), file);

    Params resumed = copy_of(ps);
    auto fresh = make(resumed, 0.5);
    fresh->load_state_dict(load(file));
    std::filesystem::remove(file);
    EXPECT_EQ(fresh->lr(0), 0.05);
    EXPECT_EQ(fresh->lr(1), 0.025);
    const nn::StateDict sd = fresh->state_dict();
    EXPECT_EQ(sd.keys(), opt->state_dict().keys());
    for (const auto& [key, t] : sd) {
      if (key.rfind("state.", 0) == 0 && key.find(".step") == std::string::npos) {
        EXPECT_EQ(t.device(), dev_) << key;  // moved to the parameter's device
      }
    }

    run(*opt, ps, 2, 3);
    run(*fresh, resumed, 2, 3);
    const auto a = ps.all(), b = resumed.all();
    for (size_t i = 0; i < a.size(); ++i) {
      const auto x = a[i].cpu().to_vector<float>(), y = b[i].cpu().to_vector<float>();
      EXPECT_EQ(std::memcmp(x.data(), y.data(), x.size() * sizeof(float)), 0) << name << " parameter " << i;
    }
  }
};

TEST_P(OptimState, AdamKeysFollowPyTorchsNumbering) {
  Params ps = make_params(dev_);
  auto opt = make_adam(ps, 0.05);
  EXPECT_EQ(
      opt->state_dict().keys(),
      (std::vector<std::string>{"param_groups.0.lr", "param_groups.0.betas", "param_groups.0.eps",
                                "param_groups.0.weight_decay", "param_groups.0.maximize", "param_groups.0.params",
                                "param_groups.1.lr", "param_groups.1.betas", "param_groups.1.eps",
                                "param_groups.1.weight_decay", "param_groups.1.maximize", "param_groups.1.params"}));
  run(*opt, ps, 0, 2);
  const nn::StateDict sd = opt->state_dict();
  // Parameter 3 never had a gradient: no state, as in PyTorch.
  EXPECT_EQ(sd.keys(), (std::vector<std::string>{"state.0.step",
                                                 "state.0.exp_avg",
                                                 "state.0.exp_avg_sq",
                                                 "state.1.step",
                                                 "state.1.exp_avg",
                                                 "state.1.exp_avg_sq",
                                                 "state.2.step",
                                                 "state.2.exp_avg",
                                                 "state.2.exp_avg_sq",
                                                 "param_groups.0.lr",
                                                 "param_groups.0.betas",
                                                 "param_groups.0.eps",
                                                 "param_groups.0.weight_decay",
                                                 "param_groups.0.maximize",
                                                 "param_groups.0.params",
                                                 "param_groups.1.lr",
                                                 "param_groups.1.betas",
                                                 "param_groups.1.eps",
                                                 "param_groups.1.weight_decay",
                                                 "param_groups.1.maximize",
                                                 "param_groups.1.params"}));
  EXPECT_EQ(sd["state.2.step"].dtype(), kFloat32);
  EXPECT_EQ(sd["state.2.step"].dim(), 0);
  EXPECT_EQ(sd["state.2.step"].item<double>(), 2.0);
  EXPECT_EQ(sd["state.1.exp_avg"].sizes(), (IntList{2}));
  EXPECT_EQ(sd["param_groups.0.lr"].dtype(), kFloat64);
  EXPECT_EQ(sd["param_groups.0.lr"].dim(), 0);
  EXPECT_EQ(sd["param_groups.1.lr"].item<double>(), 0.025);
  EXPECT_EQ(values(sd["param_groups.0.betas"]), (std::vector<double>{0.8, 0.99}));
  EXPECT_EQ(sd["param_groups.0.maximize"].dtype(), kBool);
  EXPECT_EQ(sd["param_groups.1.params"].to_vector<int64_t>(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(sd["param_groups.0.params"].to_vector<int64_t>(), (std::vector<int64_t>{0, 1}));
}

TEST_P(OptimState, SGDKeys) {
  Params ps = make_params(dev_);
  auto opt = make_sgd(ps, 0.1);
  run(*opt, ps, 0, 1);
  const nn::StateDict sd = opt->state_dict();
  EXPECT_EQ(sd.keys(),
            (std::vector<std::string>{
                "state.0.momentum_buffer", "state.1.momentum_buffer", "state.2.momentum_buffer", "param_groups.0.lr",
                "param_groups.0.momentum", "param_groups.0.dampening", "param_groups.0.weight_decay",
                "param_groups.0.nesterov", "param_groups.0.maximize", "param_groups.0.params", "param_groups.1.lr",
                "param_groups.1.momentum", "param_groups.1.dampening", "param_groups.1.weight_decay",
                "param_groups.1.nesterov", "param_groups.1.maximize", "param_groups.1.params"}));
  EXPECT_TRUE(sd["param_groups.1.nesterov"].item<bool>());
  EXPECT_EQ(sd["param_groups.1.momentum"].item<double>(), 0.8);
  // The first step's buffer is the gradient itself: 0.6 p + 0.3 for parameter 1.
  const std::vector<double> buffer = values(sd["state.1.momentum_buffer"]);
  ASSERT_EQ(buffer.size(), 2u);
  EXPECT_NEAR(buffer[0], 1.2, 1e-6);
  EXPECT_NEAR(buffer[1], -0.15, 1e-6);
}

TEST_P(OptimState, RoundTripsContinueBitwise) {
  round_trip(make_sgd, "sgd");
  round_trip(make_adam, "adam");
  round_trip(make_adamw, "adamw");
}

TEST_P(OptimState, StateTakesTheParametersDtype) {
  Params ps = make_params(dev_);
  auto opt = make_adam(ps, 0.05);
  run(*opt, ps, 0, 1);
  Params wide = make_params(dev_, kFloat64);
  auto other = make_adam(wide, 0.05);
  other->load_state_dict(opt->state_dict());
  const nn::StateDict sd = other->state_dict();
  EXPECT_EQ(sd["state.0.exp_avg"].dtype(), kFloat64);
  EXPECT_EQ(sd["state.0.exp_avg"].device(), dev_);
  EXPECT_EQ(values(sd["state.0.exp_avg"]), values(opt->state_dict()["state.0.exp_avg"]));
  // A copy: the two optimizers do not share buffers.
  EXPECT_NE(sd["state.0.exp_avg"].data_ptr(), opt->state_dict()["state.0.exp_avg"].data_ptr());
}

TEST_P(OptimState, ErrorsLeaveTheOptimizerAsItWas) {
  Params ps = make_params(dev_);
  auto opt = make_adam(ps, 0.05);
  run(*opt, ps, 0, 2);
  const nn::StateDict good = opt->state_dict();

  Params other_ps = copy_of(ps);
  auto target = make_adam(other_ps, 0.5);
  run(*target, other_ps, 5, 1);
  nn::StateDict before;
  for (const auto& [key, t] : target->state_dict()) before.insert(key, t.clone());

  auto edited = [&](const std::function<void(nn::StateDict&)>& edit) {
    nn::StateDict sd;
    for (const auto& [key, t] : good) sd.insert(key, t);
    edit(sd);
    return error_of<ValueError>([&] { target->load_state_dict(sd); });
  };
  EXPECT_EQ(edited([](nn::StateDict& sd) {
              for (const std::string& key : sd.keys()) {
                if (key.rfind("param_groups.1.", 0) == 0) sd.erase(key);
              }
            }),
            "loaded state dict has a different number of parameter groups");
  EXPECT_EQ(edited([](nn::StateDict& sd) { sd.insert("param_groups.1.params", tensor({2}, kInt64)); }),
            "loaded state dict contains a parameter group that doesn't match the size of optimizer's group");
  EXPECT_EQ(edited([&](nn::StateDict& sd) { sd.insert("state.1.exp_avg", zeros({3}, dev_)); }),
            "Error(s) in loading state_dict for Adam:\n\tsize mismatch for state.1.exp_avg: copying a state tensor "
            "with shape [3] from checkpoint, the shape of its parameter in current optimizer is [2].");
  EXPECT_EQ(
      edited([](nn::StateDict& sd) {
        sd.insert("state.0.momentum_buffer", zeros({2, 3}));
      }),
      "Error(s) in loading state_dict for Adam:\n\tUnexpected key(s) in state_dict: \"state.0.momentum_buffer\". ");
  EXPECT_EQ(edited([](nn::StateDict& sd) {
              sd.erase("state.2.exp_avg_sq");
              sd.erase("param_groups.0.eps");
            }),
            "Error(s) in loading state_dict for Adam:\n\tMissing key(s) in state_dict: \"param_groups.0.eps\", "
            "\"state.2.exp_avg_sq\". ");
  EXPECT_EQ(edited([](nn::StateDict& sd) { sd.insert("param_groups.1.lr", full({}, -1.0, kFloat64)); }),
            "Error(s) in loading state_dict for Adam:\n\tparameter group 1: Invalid learning rate: -1.0");
  EXPECT_EQ(edited([](nn::StateDict& sd) { sd.insert("state.0.step", full({}, -2.0)); }),
            "Error(s) in loading state_dict for Adam:\n\tinvalid value for state.0.step: expected a whole number of "
            "steps (one element, >= 0), got -2");
  // The last parameter has no state in `good`: with state for index 4, there is no such parameter.
  EXPECT_EQ(edited([](nn::StateDict& sd) { sd.insert("state.4.step", full({}, 1.0)); }),
            "Error(s) in loading state_dict for Adam:\n\tUnexpected key(s) in state_dict: \"state.4.step\". ");

  const nn::StateDict after = target->state_dict();
  ASSERT_EQ(after.keys(), before.keys());
  for (const auto& [key, t] : before) EXPECT_EQ(values(after[key]), values(t)) << key;
  EXPECT_EQ(target->lr(0), 0.5);

  // A good dict still loads afterwards.
  target->load_state_dict(good);
  EXPECT_EQ(target->lr(0), 0.05);
}

EMBER_ON_DEVICES(OptimState, "cpu", "cuda:0");

}  // namespace
}  // namespace ember
