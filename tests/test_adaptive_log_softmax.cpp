// nn::AdaptiveLogSoftmaxWithLoss against PyTorch 1.13: the expected numbers (weights, inputs,
// outputs, losses, log_prob, predict and gradients, float64) are embedded in
// adaptive_log_softmax_expected.h, made by adaptive_log_softmax_expected.py with /usr/bin/python3
// (PyTorch 1.13). PyTorch's state_dicts load into ember's module by PyTorch's keys. Each test
// runs on the cpu and on a cuda device (emulated where there is no GPU).
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "adaptive_log_softmax_expected.h"
#include "test_support.h"

using namespace ember;
using ember::testing::error_of;

namespace {

using adaptive_expected::Case;
using ALSM = nn::AdaptiveLogSoftmaxWithLoss;

// n targets spread over [0, classes) in a fixed order (int64, on `device`).
Tensor spread_targets(int64_t n, int64_t classes, Device device) {
  std::vector<int64_t> t;
  for (int64_t i = 0; i < n; ++i) t.push_back((i * 37 + 11) % classes);
  return tensor(TensorData(t), TensorOptions(kInt64)).to(device);
}

class AdaptiveLogSoftmax : public ember::testing::OnDevice {
 protected:
  const adaptive_expected::Values* find(const Case& c, const std::string& key) const {
    for (const auto& [name, v] : c) {
      if (name == key) return &v;
    }
    return nullptr;
  }
  Tensor value(const Case& c, const std::string& key, DType dtype = kFloat64) const {
    const adaptive_expected::Values* v = find(c, key);
    if (v == nullptr) {
      ADD_FAILURE() << "no expected value '" << key << "'";
      return Tensor();
    }
    return tensor(TensorData(v->data), TensorOptions(kFloat64)).reshape(v->shape).to(dtype).to(dev_);
  }
  Tensor leaf(const Case& c, const std::string& key) const { return value(c, key).requires_grad_(true); }
  Tensor target(const Case& c, const std::string& key) const { return value(c, key, kInt64); }

  /// The module in float64 on the device, with the case's state dict (PyTorch's keys).
  void load(nn::Module& module, const Case& c) const {
    module.to(dev_, kFloat64);
    nn::StateDict state;
    for (const auto& key : module.state_dict().keys()) state.insert(key, value(c, key));
    module.load_state_dict(state);
  }

  static void expect_close(const Tensor& got, const Tensor& expected, const std::string& what) {
    ASSERT_TRUE(got.defined()) << what;
    ASSERT_EQ(got.sizes(), expected.sizes()) << what;
    EXPECT_EQ(got.device(), expected.device()) << what;
    const std::vector<double> g = got.cpu().contiguous().reshape({-1}).to(kFloat64).to_vector<double>();
    const std::vector<double> e = expected.cpu().contiguous().reshape({-1}).to_vector<double>();
    for (size_t i = 0; i < g.size(); ++i) {
      ASSERT_NEAR(g[i], e[i], 1e-10 * (1 + std::abs(e[i]))) << what << " [" << i << "]";
    }
  }

  /// The gradients of x and of every parameter equal the case's "<prefix>.<name>"; a
  /// parameter without an entry has no gradient in PyTorch, nor here.
  void expect_grads(nn::Module& module, const Case& c, const std::string& prefix, const Tensor& x) const {
    expect_close(x.grad(), value(c, prefix + ".x"), prefix + ".x");
    for (const auto& [key, p] : module.named_parameters()) {
      if (find(c, prefix + "." + key) == nullptr) {
        EXPECT_FALSE(p.grad().defined()) << prefix << "." << key;
      } else {
        expect_close(p.grad(), value(c, prefix + "." + key), prefix + "." + key);
      }
    }
    module.zero_grad();
    x.mutable_grad() = Tensor();
  }

  /// forward(x<suffix>, target<suffix>): output and loss, and the gradients of
  /// loss + sum(output * probe).
  void expect_forward(ALSM& module, const Case& c, const std::string& suffix) const {
    Tensor x = leaf(c, "x" + suffix);
    nn::ASMoutput out = module(x, target(c, "target" + suffix));
    expect_close(out.output, value(c, "output" + suffix), "output" + suffix);
    expect_close(out.loss, value(c, "loss" + suffix), "loss" + suffix);
    (out.loss + (out.output * value(c, "probe" + suffix)).sum()).backward();
    expect_grads(module, c, "grad" + suffix, x);
  }

  /// The whole case: forward, log_prob and their gradients, double backward, predict on the
  /// case's input and on rows that take each of predict's paths.
  void expect_case(ALSM& module, const Case& c) const {
    load(module, c);
    expect_forward(module, c, "");
    Tensor x = leaf(c, "x");
    Tensor lp = module.log_prob(x);
    expect_close(lp, value(c, "log_prob"), "log_prob");
    (lp * value(c, "probe_lp")).sum().backward();
    expect_grads(module, c, "lp_grad", x);
    // Double backward: through the first gradient (create_graph), as PyTorch's.
    const Tensor gx = autograd::grad({module(x, target(c, "target")).loss}, {x}, {}, std::nullopt, true)[0];
    gx.pow(2).sum().backward();
    expect_grads(module, c, "gg", x);
    for (const char* kind : {"", "_head", "_tail", "_mixed"}) {
      const std::string k(kind);
      Tensor rows = k.empty() ? value(c, "x") : value(c, "predict_x" + k);
      Tensor predicted = module.predict(rows);
      EXPECT_EQ(predicted.dtype(), kInt64);
      EXPECT_TRUE(predicted.equal(value(c, "predict" + k, kInt64))) << "predict" << k << ": " << predicted;
      EXPECT_TRUE(predicted.equal(module.log_prob(rows).argmax(1))) << "predict" << k;
    }
  }
};

TEST_P(AdaptiveLogSoftmax, TwoClustersMatchPyTorch) {
  ALSM module(8, 20, {5, 10}, 2.0);
  expect_case(module, adaptive_expected::k_two_clusters);
}

TEST_P(AdaptiveLogSoftmax, HeadBiasAndUnbatchedInputsMatchPyTorch) {
  ALSM module(4, 6, {3}, 4.0, /*head_bias=*/true);
  const Case& c = adaptive_expected::k_head_bias;
  expect_case(module, c);
  expect_forward(module, c, "_unbatched");       // a tail target: output and loss are 0-d
  expect_forward(module, c, "_unbatched_head");  // a shortlist target: the tail gets no gradient
  EXPECT_EQ(module(value(c, "x_unbatched"), target(c, "target_unbatched")).output.dim(), 0);
}

TEST_P(AdaptiveLogSoftmax, ThreeClustersMatchPyTorchAndAnUnusedTailGetsNoGradient) {
  ALSM module(16, 30, {4, 10, 20}, 2.0);
  const Case& c = adaptive_expected::k_three_clusters;
  expect_case(module, c);                // no target in [10, 20): tail.1 gets no gradient from forward
  expect_forward(module, c, "_single");  // a batch of one keeps its batch dim
}

TEST_P(AdaptiveLogSoftmax, ShapeAndTargetErrorsUsePyTorchsMessagesAndChangeNothing) {
  ALSM module(3, 6, {3});
  module.to(dev_);
  const TensorOptions opts = TensorOptions(kFloat32).device(dev_);
  const TensorOptions index = TensorOptions(kInt64).device(dev_);
  const Tensor before = module.head->weight.clone();
  auto forward_error = [&](const Tensor& x, const Tensor& t) { return error_of<ValueError>([&] { module(x, t); }); };
  EXPECT_EQ(forward_error(randn({3, 3}, opts), tensor({0, 6, -1}, index)),
            "Target values should be in [0, 5], but values in range [-1, 6] were found.");
  EXPECT_EQ(forward_error(randn({3, 3}, opts), tensor({0, 6}, index)),
            "Input and target should have the same size in the batch dimension.");
  EXPECT_EQ(forward_error(randn({3}, opts), tensor({0, 5, 1}, index)),
            "1D target tensor expects 2D input tensors, but found inputs with size [3]");
  EXPECT_EQ(forward_error(randn({3, 3}, opts), tensor(1, index)),
            "0D target tensor expects 1D input tensors, but found inputs with size [3, 3]");
  EXPECT_EQ(forward_error(randn({3, 3}, opts), tensor({{1}}, index)),
            "0D or 1D target tensor expected, multi-target not supported");
  EXPECT_EQ(forward_error(randn({3}, opts), tensor(6, index)),
            "Target values should be in [0, 5], but values in range [6, 6] were found.");
  const Tensor int32_target = tensor({0, 1}, TensorOptions(kInt32).device(dev_));
  EXPECT_EQ(error_of<TypeError>([&] {
              module(randn({2, 3}, opts), int32_target);
            }),
            "AdaptiveLogSoftmaxWithLoss: expected target of dtype int64 (class indices), but got torch.int32");
  // A wrong feature count is the head's error, naming it.
  EXPECT_THROW_MSG(module(randn({2, 4}, opts), tensor({0, 1}, index)), ValueError,
                   "Linear(in_features=3, out_features=4, bias=False): ");
  if (dev_.is_cuda()) {
    EXPECT_THROW_MSG(module(randn({2, 3}, opts), tensor({0, 1}, TensorOptions(kInt64))), DeviceError,
                     "Expected all tensors to be on the same device");
  }
  EXPECT_TRUE(module.head->weight.equal(before));
  EXPECT_FALSE(module.head->weight.grad().defined());
}

TEST_P(AdaptiveLogSoftmax, AnEmptyBatchGivesAnEmptyOutputAndANanLoss) {
  ALSM module(3, 6, {3});
  module.to(dev_);
  const Tensor no_rows = empty({0, 3}, TensorOptions(kFloat32).device(dev_));
  nn::ASMoutput out = module(no_rows, empty({0}, TensorOptions(kInt64).device(dev_)));
  EXPECT_EQ(out.output.sizes(), IntList({0}));
  EXPECT_TRUE(std::isnan(out.loss.item<float>()));  // PyTorch's mean of nothing
  EXPECT_EQ(module.predict(no_rows).sizes(), IntList({0}));
}

TEST_P(AdaptiveLogSoftmax, AZeroWidthTailGivesItsClustersAUniformDistribution) {
  // 3 // 4.0 is 0: PyTorch builds Linear(3, 0) and Linear(0, 3), whose logits are all zero.
  ALSM module(3, 6, {3}, 4.0);
  module.to(dev_, kFloat64);
  EXPECT_EQ(module.state_dict()["tail.0.0.weight"].sizes(), IntList({0, 3}));
  Tensor x = randn({2, 3}, TensorOptions(kFloat64).device(dev_));
  Tensor head_lp = module.head->forward(x).log_softmax(1);
  nn::ASMoutput out = module(x, tensor({4, 1}, TensorOptions(kInt64).device(dev_)));
  const std::vector<double> got = out.output.cpu().to_vector<double>();
  EXPECT_NEAR(got[0], head_lp[0][3].item<double>() - std::log(3.0), 1e-12);
  EXPECT_NEAR(got[1], head_lp[1][1].item<double>(), 1e-12);
}

TEST_P(AdaptiveLogSoftmax, ProjectionsFollowTheMatmulTf32FlagOnCudaDevicesOnly) {
  manual_seed(0);
  ALSM module(64, 100, {20, 50}, 2.0);
  module.to(dev_);
  const Tensor x = randn({32, 64}, TensorOptions(kFloat32).device(dev_));
  const Tensor t = spread_targets(32, 100, dev_);
  ASSERT_TRUE(static_cast<bool>(backends::cuda::matmul.allow_tf32));  // the default
  const nn::ASMoutput tf32 = module(x, t);
  const Tensor lp_tf32 = module.log_prob(x);
  backends::cuda::matmul.allow_tf32 = false;
  const nn::ASMoutput full = module(x, t);
  const Tensor lp_full = module.log_prob(x);
  backends::cudnn.allow_tf32 = false;  // not this module's flag: nothing changes
  const Tensor lp_no_cudnn = module.log_prob(x);
  backends::cuda::matmul.allow_tf32 = true;
  backends::cudnn.allow_tf32 = true;
  EXPECT_TRUE(lp_no_cudnn.equal(lp_full));
  // float64 with the same weights: full float32 is the closer of the two.
  module.to(kFloat64);
  const Tensor lp_exact = module.log_prob(x.to(kFloat64));
  const double err_tf32 = (lp_tf32.to(kFloat64) - lp_exact).abs().max().item<double>();
  const double err_full = (lp_full.to(kFloat64) - lp_exact).abs().max().item<double>();
  if (dev_.is_cpu()) {  // the cpu never rounds to TF32
    EXPECT_TRUE(tf32.output.equal(full.output));
    EXPECT_TRUE(lp_tf32.equal(lp_full));
    return;
  }
  EXPECT_FALSE(tf32.output.equal(full.output));
  EXPECT_FALSE(tf32.loss.equal(full.loss));
  EXPECT_GT(err_tf32, 10 * err_full) << err_tf32 << " vs " << err_full;
}

TEST_P(AdaptiveLogSoftmax, ToKeepsParameterIdentityAndCloneCopiesDeeply) {
  ALSM module(8, 20, {5, 10}, 2.0);
  const std::vector<Tensor> before = module.parameters();
  module.to(dev_);
  const std::vector<Tensor> after = module.parameters();
  ASSERT_EQ(before.size(), after.size());
  for (size_t i = 0; i < before.size(); ++i) {
    EXPECT_TRUE(before[i].is_same(after[i]));
    EXPECT_EQ(before[i].device(), dev_);
  }
  EXPECT_TRUE(module.head->weight.is_same(module.named_parameters()["head.weight"]));

  auto copy = std::dynamic_pointer_cast<ALSM>(module.clone());
  ASSERT_NE(copy, nullptr);
  EXPECT_EQ(copy->cutoffs, module.cutoffs);
  EXPECT_EQ(copy->repr(), module.repr());
  const nn::OrderedDict<Tensor> original = module.named_parameters(), copied = copy->named_parameters();
  ASSERT_EQ(original.keys(), copied.keys());
  for (const auto& key : original.keys()) {
    EXPECT_FALSE(original[key].is_same(copied[key])) << key;
    EXPECT_TRUE(original[key].equal(copied[key])) << key;
    EXPECT_EQ(copied[key].device(), dev_) << key;
  }
  // The copy's members are its own registered children.
  EXPECT_TRUE(copy->head->weight.is_same(copy->named_parameters()["head.weight"]));
  EXPECT_FALSE(copy->head->weight.is_same(module.head->weight));
  EXPECT_EQ(copy->tail.get(), copy->named_children()["tail"].get());
}

TEST_P(AdaptiveLogSoftmax, TrainingReducesTheLoss) {
  manual_seed(1);
  ALSM module(16, 40, {4, 12, 25}, 2.0, /*head_bias=*/true);
  module.to(dev_);
  // Each class is a noisy cluster around its own centre: learnable.
  const Tensor centres = randn({40, 16}, TensorOptions(kFloat32).device(dev_));
  const Tensor t = spread_targets(64, 40, dev_);
  const Tensor x = centres.index_select(0, t) + 0.1 * randn({64, 16}, TensorOptions(kFloat32).device(dev_));
  optim::SGD sgd(module.parameters(), optim::SGDOptions(0.5).momentum(0.9));
  const double first = module(x, t).loss.item<double>();
  double last = first;
  for (int step = 0; step < 40; ++step) {
    sgd.zero_grad();
    nn::ASMoutput out = module(x, t);
    out.loss.backward();
    sgd.step();
    last = out.loss.item<double>();
  }
  EXPECT_LT(last, 0.5 * first) << first << " -> " << last;
}

EMBER_ON_DEVICES(AdaptiveLogSoftmax, "cpu", "cuda:0");

// ---- device-independent: construction, names, printing ------------------------------------------

TEST(AdaptiveLogSoftmaxModule, ParametersHavePyTorchsNamesShapesAndInitialisation) {
  ALSM module(8, 20, {5, 10}, 2.0);
  EXPECT_EQ(module.cutoffs, (std::vector<int64_t>{5, 10, 20}));
  EXPECT_EQ(module.shortlist_size, 5);
  EXPECT_EQ(module.n_clusters, 2);
  EXPECT_EQ(module.head_size, 7);
  // PyTorch 1.13's state_dict of AdaptiveLogSoftmaxWithLoss(8, 20, [5, 10], div_value=2.0).
  const std::vector<std::pair<std::string, IntList>> expected = {{"head.weight", {7, 8}},
                                                                 {"tail.0.0.weight", {4, 8}},
                                                                 {"tail.0.1.weight", {5, 4}},
                                                                 {"tail.1.0.weight", {2, 8}},
                                                                 {"tail.1.1.weight", {10, 2}}};
  const nn::StateDict state = module.state_dict();
  ASSERT_EQ(state.size(), expected.size());
  for (const auto& [key, shape] : expected) {
    EXPECT_EQ(state[key].sizes(), shape) << key;
    // Linear's kaiming_uniform_(a=sqrt(5)): uniform(+-1/sqrt(fan_in)).
    const double bound = 1.0 / std::sqrt(static_cast<double>(shape[1]));
    EXPECT_LE(state[key].abs().max().item<double>(), bound) << key;
  }
  EXPECT_EQ(ALSM(4, 6, {3}, 4.0, true).state_dict().keys(),
            (std::vector<std::string>{"head.weight", "head.bias", "tail.0.0.weight", "tail.0.1.weight"}));
}

TEST(AdaptiveLogSoftmaxModule, ResetParametersRedrawsEveryProjectionInPlace) {
  manual_seed(3);
  ALSM module(8, 20, {5, 10}, 2.0, true);
  const std::vector<Tensor> params = module.parameters();
  std::vector<Tensor> old;
  for (const Tensor& p : params) old.push_back(p.clone());
  module.reset_parameters();
  const std::vector<Tensor> now = module.parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_TRUE(now[i].is_same(params[i]));
    EXPECT_FALSE(now[i].equal(old[i])) << i;
  }
}

TEST(AdaptiveLogSoftmaxModule, PrintsAsPyTorch) {
  // str() of PyTorch 1.13's module.
  EXPECT_EQ(ALSM(8, 20, {5, 10}, 2.0).repr(),
            "AdaptiveLogSoftmaxWithLoss(\n"
            "  (head): Linear(in_features=8, out_features=7, bias=False)\n"
            "  (tail): ModuleList(\n"
            "    (0): Sequential(\n"
            "      (0): Linear(in_features=8, out_features=4, bias=False)\n"
            "      (1): Linear(in_features=4, out_features=5, bias=False)\n"
            "    )\n"
            "    (1): Sequential(\n"
            "      (0): Linear(in_features=8, out_features=2, bias=False)\n"
            "      (1): Linear(in_features=2, out_features=10, bias=False)\n"
            "    )\n"
            "  )\n"
            ")");
}

TEST(AdaptiveLogSoftmaxModule, CutoffsAreCheckedWithPyTorchsMessage) {
  const std::string message =
      "cutoffs should be a sequence of unique, positive integers sorted in an increasing order, where each value is "
      "between 1 and n_classes-1";
  for (const std::vector<int64_t>& cutoffs :
       std::vector<std::vector<int64_t>>{{10, 5}, {5, 5}, {0, 5}, {-1, 5}, {5, 20}, {5, 25}, {}}) {
    EXPECT_EQ(error_of<ValueError>([&] { ALSM(8, 20, cutoffs); }), message) << ::testing::PrintToString(cutoffs);
  }
  EXPECT_EQ(ALSM(8, 20, {19}).n_clusters, 1);  // n_classes - 1 is the largest allowed
  EXPECT_EQ(ALSM(8, 20, {1, 2, 3}).shortlist_size, 1);
  EXPECT_THROW(ALSM(8, 20, {5}, 0.0), ValueError);  // 8 // 0.0: no hidden size
}

}  // namespace

namespace {

TEST(AdaptiveLogSoftmaxGradients, FiniteDifferencesAgree) {
  manual_seed(5);
  ALSM module(6, 12, {3, 7}, 2.0, true);
  module.to(kFloat64);
  const Tensor target = tensor({0, 4, 11, 2, 8}, TensorOptions(kInt64));
  Tensor x = randn({5, 6}, TensorOptions(kFloat64)).requires_grad_(true);
  EXPECT_TRUE(autograd::gradcheck(
      [&](const std::vector<Tensor>& in) {
        nn::ASMoutput out = module(in[0], target);
        return std::vector<Tensor>{out.output, out.loss, module.log_prob(in[0])};
      },
      {x}));
}

}  // namespace
