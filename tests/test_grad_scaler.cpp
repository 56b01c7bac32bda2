// amp::GradScaler and its two kernels (amp::foreach_non_finite_check_and_unscale_,
// amp::update_scale_) on the cpu and cuda devices (emulated without a GPU). The expected
// scale trace follows PyTorch's _amp_update_scale_ rule (torch/amp/grad_scaler.py; PyTorch
// 1.13's GradScaler needs CUDA, so the trace is the rule applied by hand, step by step in
// the test's comments); messages are PyTorch's.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include "ember/ember.h"
#include "ops_on_devices.h"
#include "test_support.h"

namespace ember::testing {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

class GradScalerTest : public OnDevice {
 protected:
  TensorOptions f32() const { return TensorOptions(kFloat32).device(dev_); }
};

// init_scale 4, growth_factor 2, backoff 0.5, growth_interval 2. Step k's loss is (p * c_k).sum(),
// so p's gradient is c_k * scale; SGD(lr 0.5) then moves p by -0.5 * c_k when it steps.
TEST_P(GradScalerTest, ScaleTraceFollowsTorchsRule) {
  Tensor p = tensor({1.0f, 2.0f}).to(dev_).requires_grad_();
  optim::SGD sgd({p}, optim::SGDOptions(0.5));
  amp::GradScaler scaler(dev_.is_cuda() ? "cuda" : "cpu", 4.0, 2.0, 0.5, 2);
  struct Step {
    std::vector<float> c;
    bool steps;
    double scale_after;
  };
  const std::vector<Step> script = {
      {{1, 1}, true, 4},      // clean: tracker 1
      {{2, -2}, true, 8},     // clean: tracker 2 == interval, scale x2, tracker 0
      {{kInf, 1}, false, 4},  // inf: skipped, scale x0.5
      {{1, 0}, true, 4},      // clean: tracker 1
      {{kNaN, 0}, false, 2},  // NaN: skipped, scale x0.5, tracker 0
      {{0, 4}, true, 2},      // clean: tracker 1
      {{-1, 1}, true, 4},     // clean: growth
  };
  std::vector<float> expected = {1.0f, 2.0f};
  for (size_t k = 0; k < script.size(); ++k) {
    sgd.zero_grad();
    const Tensor loss = (p * tensor(script[k].c).to(dev_)).sum();
    const Tensor scaled = scaler.scale(loss);
    if (std::isfinite(loss.item<float>())) {
      EXPECT_FLOAT_EQ(scaled.item<float>(), loss.item<float>() * static_cast<float>(scaler.get_scale()))
          << "step " << k;
    }
    scaled.backward();
    EXPECT_EQ(scaler.step(sgd), script[k].steps) << "step " << k;
    scaler.update();
    EXPECT_EQ(scaler.get_scale(), script[k].scale_after) << "step " << k;
    if (script[k].steps) {
      for (size_t i = 0; i < 2; ++i) expected[i] -= 0.5f * script[k].c[i];
    }
    expect_values(p.detach(), {expected[0], expected[1]}, 0);
  }
  EXPECT_EQ(scaler.state_dict().find("_growth_tracker")->item<int64_t>(), 0);
}

TEST_P(GradScalerTest, UnscaleBeforeClippingThenStep) {
  Tensor p = tensor({3.0f, 4.0f}).to(dev_).requires_grad_();
  optim::SGD sgd({p}, optim::SGDOptions(1.0));
  amp::GradScaler scaler(dev_, 1024.0);
  scaler.scale((p * p).sum() / 2).backward();  // gradient p, scaled by 1024
  expect_values(p.grad(), {3072, 4096}, 0);
  scaler.unscale_(sgd);
  expect_values(p.grad(), {3, 4}, 0);
  nn::utils::clip_grad_norm_({p}, 1.0);
  EXPECT_TRUE(scaler.step(sgd));  // does not unscale again
  expect_values(p.detach(), {3.0 - 0.6, 4.0 - 0.8}, 1e-6);
  scaler.update();
  EXPECT_EQ(scaler.get_scale(), 1024.0);
}

TEST_P(GradScalerTest, MisuseGetsTorchsErrorsAndStateIsKept) {
  Tensor p = tensor({1.0f}).to(dev_).requires_grad_();
  optim::SGD sgd({p}, optim::SGDOptions(0.1));
  amp::GradScaler scaler(dev_, 8.0);
  EXPECT_THROW_MSG(scaler.unscale_(sgd), Error, "Attempted unscale_ but _scale is None.");
  EXPECT_THROW_MSG(scaler.update(), Error, "Attempted update but _scale is None.");
  scaler.scale((p * 2).sum()).backward();
  scaler.unscale_(sgd);
  EXPECT_THROW_MSG(scaler.unscale_(sgd), Error,
                   "unscale_() has already been called on this optimizer since the last update().");
  EXPECT_TRUE(scaler.step(sgd));
  EXPECT_THROW_MSG(scaler.step(sgd), Error, "step() has already been called since the last update().");
  EXPECT_THROW_MSG(scaler.unscale_(sgd), Error, "unscale_() is being called after step().");
  scaler.update();
  EXPECT_THROW_MSG(scaler.update(), Error, "No inf checks were recorded prior to update.");
  EXPECT_EQ(scaler.get_scale(), 8.0);

  // float16 gradients: refused before any gradient is touched.
  Tensor h = tensor({1.0f}).to(dev_).to(kFloat16).requires_grad_();
  optim::SGD half_sgd({p, h}, optim::SGDOptions(0.1));
  sgd.zero_grad();
  scaler.scale((p * 2).sum() + (h * 2).sum().to(kFloat32)).backward();
  EXPECT_THROW_MSG(scaler.unscale_(half_sgd), ValueError, "Attempting to unscale FP16 gradients.");
  expect_values(p.grad(), {16}, 0);  // still scaled
  // An optimizer whose parameters have no gradient records no inf checks.
  Tensor q = tensor({1.0f}).to(dev_).requires_grad_();
  optim::SGD idle({q}, optim::SGDOptions(0.1));
  EXPECT_THROW_MSG(scaler.step(idle), Error, "No inf checks were recorded for this optimizer.");
  EXPECT_THROW_MSG(amp::GradScaler(dev_, 1.0, 1.0), ValueError, "The growth factor must be > 1.0.");
  EXPECT_THROW_MSG(amp::GradScaler(dev_, 1.0, 2.0, 1.0), ValueError, "The backoff factor must be < 1.0.");
}

TEST_P(GradScalerTest, NewScaleAndStateDictRoundTrip) {
  Tensor p = tensor({1.0f}).to(dev_).requires_grad_();
  optim::SGD sgd({p}, optim::SGDOptions(0.1));
  amp::GradScaler scaler(dev_, 16.0, 3.0, 0.25, 5);
  EXPECT_EQ(scaler.get_scale(), 16.0);  // before the first scale(): init_scale
  scaler.scale(p.sum()).backward();
  scaler.step(sgd);
  scaler.update(64.0);
  EXPECT_EQ(scaler.get_scale(), 64.0);
  const nn::StateDict sd = scaler.state_dict();
  EXPECT_EQ(sd.find("scale")->item<double>(), 64.0);
  EXPECT_EQ(sd.find("growth_factor")->item<double>(), 3.0);
  EXPECT_EQ(sd.find("backoff_factor")->item<double>(), 0.25);
  EXPECT_EQ(sd.find("growth_interval")->item<int64_t>(), 5);
  EXPECT_EQ(sd.find("_growth_tracker")->item<int64_t>(), 0);

  amp::GradScaler fresh(dev_);
  fresh.load_state_dict(sd);
  EXPECT_EQ(fresh.get_scale(), 64.0);
  EXPECT_EQ(fresh.get_growth_interval(), 5);
  EXPECT_EQ(fresh.get_backoff_factor(), 0.25);
  EXPECT_THROW_MSG(fresh.load_state_dict(nn::StateDict()), Error,
                   "The source state dict is empty, possibly because it was saved from a disabled instance");
  nn::StateDict bad = sd;
  bad.find("growth_factor")->fill_(0.5);
  bad.erase("_growth_tracker");
  EXPECT_THROW_MSG(fresh.load_state_dict(bad), ValueError, "Missing key(s) in state_dict: \"_growth_tracker\"");
  EXPECT_EQ(fresh.get_growth_factor(), 3.0);  // unchanged

  scaler.update(tensor({2.0f}).to(dev_));
  EXPECT_EQ(scaler.get_scale(), 2.0);
  EXPECT_THROW_MSG(scaler.update(tensor({2.0f, 3.0f})), ValueError, "new_scale should be a float or a 1-element");
}

// PyTorch 2.x keeps the scale 0-dim (torch.full((), ...)): a scaled output keeps its shape and
// a float16 output stays float16 (a 0-dim float32 factor does not promote it); two 0-dim
// operands promote as usual (float16 loss * float32 scale is float32, as in PyTorch).
TEST_P(GradScalerTest, ScaledOutputsKeepTheirShapeAndDtype) {
  amp::GradScaler scaler(dev_, 8.0);
  const Tensor loss = tensor(1.5f).to(dev_);
  const Tensor scaled = scaler.scale(loss);
  EXPECT_EQ(scaled.sizes(), IntList{});
  EXPECT_EQ(scaled.item<float>(), 12.0f);
  const Tensor outputs = tensor({0.5f, -2.0f, 3.0f}).to(kFloat16).to(dev_);
  const Tensor scaled_outputs = scaler.scale(outputs);
  EXPECT_EQ(scaled_outputs.dtype(), kFloat16);
  EXPECT_EQ(scaled_outputs.sizes(), (IntList{3}));
  expect_values(scaled_outputs, {4, -16, 24}, 0);
  EXPECT_EQ(scaler.scale(tensor(1.0f).to(kFloat16).to(dev_)).dtype(), kFloat32);
  scaler.update(tensor({2.0f}).to(dev_));  // a 1-element new scale of any shape (the message names one)
  EXPECT_EQ(scaler.scale(loss).sizes(), IntList{});
  EXPECT_EQ(scaler.get_scale(), 2.0);
}

TEST_P(GradScalerTest, DisabledScalerPassesThrough) {
  Tensor p = tensor({1.0f}).to(dev_).requires_grad_();
  optim::SGD sgd({p}, optim::SGDOptions(1.0));
  amp::GradScaler scaler(dev_, 65536.0, 2.0, 0.5, 2000, /*enabled=*/false);
  EXPECT_FALSE(scaler.is_enabled());
  const Tensor loss = (p * kInf).sum();
  EXPECT_TRUE(scaler.scale(loss).is_same(loss));
  scaler.scale(p.sum()).backward();
  scaler.unscale_(sgd);
  EXPECT_TRUE(scaler.step(sgd));
  scaler.update();
  expect_values(p.detach(), {0}, 0);
  EXPECT_EQ(scaler.get_scale(), 1.0);
  EXPECT_TRUE(scaler.state_dict().empty());
  scaler.load_state_dict(nn::StateDict());  // a no-op, as PyTorch's
}

TEST_P(GradScalerTest, CheckAndUnscaleKernel) {
  for (DType d : {kFloat32, kFloat16, kBFloat16, kFloat64}) {
    const auto opts = TensorOptions(d).device(dev_);
    Tensor a = tensor({2.0, -4.0, 8.0}).to(opts);
    Tensor strided = tensor({{1.0, 2.0}, {3.0, 4.0}}).to(opts).t();  // not contiguous
    Tensor empty = zeros({0}, opts);
    Tensor found = zeros({1}, f32());
    const Tensor inv = tensor({0.5f}).to(dev_);
    amp::foreach_non_finite_check_and_unscale_({a, strided, empty, Tensor()}, found, inv);
    expect_values(a.to(kFloat64), {1, -2, 4}, 0);
    expect_values(strided.to(kFloat64), {0.5, 1.5, 1, 2}, 0);
    EXPECT_EQ(found.item<float>(), 0.0f) << dtype_name(d);
    for (double bad : {double(kInf), -double(kInf), double(kNaN)}) {
      Tensor g = tensor({1.0, bad, 3.0}).to(opts);
      Tensor flag = zeros({1}, f32());
      amp::foreach_non_finite_check_and_unscale_({a, g}, flag, inv);
      EXPECT_EQ(flag.item<float>(), 1.0f) << dtype_name(d) << " " << bad;
      amp::foreach_non_finite_check_and_unscale_({a}, flag, inv);
      EXPECT_EQ(flag.item<float>(), 1.0f) << "never cleared";
    }
  }
  Tensor found = zeros({1}, f32());
  EXPECT_THROW_MSG(amp::foreach_non_finite_check_and_unscale_({}, found, tensor({1.0, 2.0})), ValueError,
                   "inv_scale must be a one-element tensor.");
  Tensor ints = zeros({1}, TensorOptions(kInt32).device(dev_));
  EXPECT_THROW_MSG(amp::foreach_non_finite_check_and_unscale_({}, ints, tensor({1.0f}).to(dev_)), TypeError,
                   "found_inf must be a float tensor.");
}

TEST_P(GradScalerTest, UpdateScaleKernel) {
  Tensor scale = tensor({1e38f}).to(dev_);
  Tensor tracker = zeros({1}, TensorOptions(kInt32).device(dev_));
  const Tensor clean = zeros({1}, f32()), inf = ones({1}, f32());
  amp::update_scale_(scale, tracker, clean, 10.0, 0.5, 1);  // growth would overflow: kept
  EXPECT_EQ(scale.item<float>(), 1e38f);
  EXPECT_EQ(tracker.item<int32_t>(), 0);
  amp::update_scale_(scale, tracker, inf, 10.0, 0.5, 1);
  EXPECT_EQ(scale.item<float>(), 5e37f);
  amp::update_scale_(scale, tracker, clean, 2.0, 0.5, 3);
  amp::update_scale_(scale, tracker, clean, 2.0, 0.5, 3);
  EXPECT_EQ(tracker.item<int32_t>(), 2);
  EXPECT_THROW_MSG(amp::update_scale_(scale, tracker, clean, 2.0, 0.5, 0), ValueError,
                   "growth_interval must be a positive 32-bit integer");
  Tensor wrong = zeros({1}, TensorOptions(kInt64).device(dev_));
  EXPECT_THROW_MSG(amp::update_scale_(scale, wrong, clean, 2.0, 0.5, 3), TypeError,
                   "growth_tracker must be an int tensor.");
  EXPECT_EQ(tracker.item<int32_t>(), 2);
}

EMBER_ON_DEVICES(GradScalerTest, "cpu", "cuda:0");

// Parameters on two devices: one inf gradient on the second skips the whole step.
TEST(GradScalerDevices, AnInfOnOneDeviceSkipsTheStep) {
  EMBER_REQUIRE_DEVICES(2);
  Tensor a = tensor({1.0f}).to(Device(kCUDA, 0)).requires_grad_();
  Tensor b = tensor({1.0f}).to(Device(kCUDA, 1)).requires_grad_();
  optim::SGD sgd({a, b}, optim::SGDOptions(1.0));
  amp::GradScaler scaler("cuda", 2.0);
  Tensor loss = a.sum() + (b * kInf).sum().to(Device(kCUDA, 0));
  scaler.scale(loss).backward();
  EXPECT_FALSE(scaler.step(sgd));
  scaler.update();
  EXPECT_EQ(scaler.get_scale(), 1.0);
  EXPECT_EQ(a.item<float>(), 1.0f);
  sgd.zero_grad();
  scaler.scale(a.sum() + b.sum().to(Device(kCUDA, 0))).backward();
  EXPECT_TRUE(scaler.step(sgd));
  EXPECT_EQ(a.item<float>(), 0.0f);
  EXPECT_EQ(b.item<float>(), 0.0f);
}

// One training step of a small MLP from identical weights, float16 under autocast with a
// scaler against float32: the updated weights agree to float16's precision.
TEST(GradScalerTraining, AFloat16StepEqualsTheFloat32StepToFloat16Tolerance) {
  EMBER_REQUIRE_DEVICES(1);
  const Device dev(kCUDA, 0);
  auto run = [&](bool amp) {
    manual_seed(21);
    nn::Sequential net(
        {std::make_shared<nn::Linear>(16, 32), std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(32, 4)});
    net.to(dev);
    optim::SGD sgd(net.parameters(), optim::SGDOptions(0.5));
    amp::GradScaler scaler("cuda", 1024.0, 2.0, 0.5, 2000, /*enabled=*/amp);
    const Tensor x = randn({8, 16}, TensorOptions(kFloat32).device(dev));
    const Tensor y = tensor({0, 1, 2, 3, 0, 1, 2, 3}, TensorOptions(kInt64).device(dev));
    Tensor loss;
    {
      autocast guard(kCUDA, kFloat16, /*enabled=*/amp);
      loss = nn::functional::cross_entropy(net.forward(x), y);
    }
    EXPECT_EQ(loss.dtype(), kFloat32);
    sgd.zero_grad();
    scaler.scale(loss).backward();
    EXPECT_TRUE(scaler.step(sgd));
    scaler.update();
    std::vector<Tensor> weights;
    for (const Tensor& p : net.parameters()) weights.push_back(p.detach().cpu());
    return weights;
  };
  const std::vector<Tensor> half = run(true), full = run(false);
  ASSERT_EQ(half.size(), full.size());
  for (size_t i = 0; i < half.size(); ++i) {
    EXPECT_EQ(half[i].dtype(), kFloat32);
    EXPECT_TRUE(half[i].allclose(full[i], 1e-2, 2e-3)) << "parameter " << i;
    EXPECT_FALSE(half[i].equal(full[i])) << "parameter " << i << ": the float16 step should round";
  }
}

// Note [Scaler steps on the device]: a capturable optimizer steps with the found-inf flags on
// the device, no host sync. Eagerly it gives the host path's numbers exactly; captured in a
// CUDA graph with the whole mixed-precision step, each replay skips or steps by its own data.
struct AmpStepRun {
  explicit AmpStepRun(Device dev, bool capturable) : dev(dev) {
    manual_seed(31);
    layer = std::make_shared<nn::Linear>(8, 4);
    layer->to(dev);
    adam = std::make_unique<optim::Adam>(layer->parameters(), optim::AdamOptions(0.01).capturable(capturable));
    scaler = std::make_unique<amp::GradScaler>(dev, 256.0, 2.0, 0.5, /*growth_interval=*/2);
    x = randn({16, 8}, TensorOptions(kFloat32).device(dev));
  }
  // One step on `x` (float16 under autocast on cuda); an inf in x overflows the gradients.
  void step() {
    adam->zero_grad(/*set_to_none=*/false);
    Tensor loss;
    {
      autocast guard(dev.type(), dev.is_cuda() ? kFloat16 : kBFloat16);
      loss = layer->forward(x).pow(2).mean();
    }
    scaler->scale(loss).backward();
    scaler->step(*adam);
    scaler->update();
  }
  std::vector<float> weights() const { return layer->weight.detach().cpu().reshape({-1}).to_vector<float>(); }

  Device dev;
  std::shared_ptr<nn::Linear> layer;
  std::unique_ptr<optim::Adam> adam;
  std::unique_ptr<amp::GradScaler> scaler;
  Tensor x;
};

TEST(GradScalerOnDevice, CapturableStepsEqualTheHostPathsAndCaptureInAGraph) {
  EMBER_REQUIRE_DEVICES(1);
  const Device dev(kCUDA, 0);
  const std::vector<bool> overflow = {false, false, true, false, false, true, false};
  AmpStepRun host(dev, false), device(dev, true), graphed(dev, true);
  // Eager: the capturable optimizer's device path against the host path, step by step.
  for (bool bad : overflow) {
    for (AmpStepRun* run : {&host, &device}) {
      run->x.select(0, 0).fill_(bad ? INFINITY : 0.5);
      run->step();
    }
    EXPECT_EQ(device.scaler->get_scale(), host.scaler->get_scale());
    EXPECT_EQ(device.weights(), host.weights());
  }
  // Captured: one eager warm-up step, then the whole step in a graph replayed per batch.
  graphed.x.select(0, 0).fill_(0.5);
  graphed.step();
  cuda::CUDAGraph graph;
  {
    cuda::graph capture(graph);
    graphed.step();
  }
  for (size_t k = 1; k < overflow.size(); ++k) {
    graphed.x.select(0, 0).fill_(overflow[k] ? INFINITY : 0.5);
    graph.replay();
  }
  cuda::synchronize();
  EXPECT_EQ(graphed.scaler->get_scale(), host.scaler->get_scale());
  EXPECT_EQ(graphed.weights(), host.weights());
}

// Training a float16 model under autocast with a scaler on a cuda device: a tiny init_scale
// grows back, a huge one backs off, and no NaN reaches the weights.
TEST(GradScalerTraining, ScaleRecoversAndWeightsStayFinite) {
  EMBER_REQUIRE_DEVICES(1);
  const Device dev(kCUDA, 0);
  for (double init : {1.0 / 1024, 1099511627776.0 /* 2^40 */}) {
    manual_seed(11);
    nn::Linear layer(8, 4);
    layer.to(dev);
    optim::SGD sgd(layer.parameters(), optim::SGDOptions(0.01));
    amp::GradScaler scaler("cuda", init, 2.0, 0.5, /*growth_interval=*/1);
    int skipped = 0;
    for (int step = 0; step < 60; ++step) {
      const Tensor x = randn({16, 8}, TensorOptions(kFloat32).device(dev));
      Tensor loss;
      {
        autocast guard(kCUDA);
        loss = layer.forward(x).pow(2).mean();
      }
      sgd.zero_grad();
      scaler.scale(loss).backward();
      skipped += scaler.step(sgd) ? 0 : 1;
      scaler.update();
    }
    for (const Tensor& w : layer.parameters()) {
      for (float v : w.cpu().reshape({-1}).to_vector<float>()) EXPECT_TRUE(std::isfinite(v)) << "init_scale " << init;
    }
    // Either way the scale ends where float16 gradients neither flush nor overflow: grown
    // from 2^-10 (doubling every clean step until gradients overflow, then backing off), or
    // backed off from 2^40 (the first steps skipped).
    EXPECT_GT(skipped, 0) << "init_scale " << init;
    EXPECT_GT(scaler.get_scale(), 1.0) << "init_scale " << init;
    EXPECT_LT(scaler.get_scale(), 1099511627776.0) << "init_scale " << init;
  }
}

}  // namespace
}  // namespace ember::testing
