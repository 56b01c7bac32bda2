// Training with CUDA graphs on an emulated device: make_graphed_callables against eager
// gradients, a whole captured step (forward, backward, capturable optimizer step) against
// the eager losses, and the optimizers' capture checks.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <functional>

#include "ember/cuda.h"
#include "ember/ember.h"
#include "ember/errors.h"

namespace cuda = ember::cuda;
namespace nn = ember::nn;
using ember::Tensor;
using ::testing::HasSubstr;

namespace {

constexpr size_t MiB = size_t{1} << 20;
const bool kEmulated = [] {
  unsetenv("CUDA_LAUNCH_BLOCKING");
  cuda::emulate(1, 512 * MiB);
  return true;
}();

const ember::Device kCuda0(ember::kCUDA, 0);

std::shared_ptr<nn::Sequential> small_model(uint64_t seed) {
  ember::manual_seed(seed);
  auto model = std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(8, 16), std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(16, 4)});
  model->to(kCuda0);
  return model;
}

std::vector<float> host(const Tensor& t) { return t.cpu().to_vector<float>(); }

void expect_near(const std::vector<float>& a, const std::vector<float>& b, float tolerance) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], tolerance) << "element " << i;
}

TEST(GraphedCallables, GradientsEqualEager) {
  ASSERT_TRUE(kEmulated);
  auto eager = small_model(3);
  auto captured_model = small_model(3);
  Tensor sample = ember::randn({5, 8}, ember::TensorOptions().device(kCuda0)).requires_grad_(true);
  auto graphed = cuda::make_graphed_callables(captured_model, {sample});
  for (const Tensor& p : captured_model->parameters()) EXPECT_FALSE(p.grad().defined());  // warm-up used grad()

  for (int iteration = 0; iteration < 3; ++iteration) {
    SCOPED_TRACE(iteration);
    Tensor x = ember::randn({5, 8}, ember::TensorOptions().device(kCuda0));
    Tensor xe = x.clone().requires_grad_(true);
    Tensor xg = x.clone().requires_grad_(true);
    Tensor target = ember::randn({5, 4}, ember::TensorOptions().device(kCuda0));
    Tensor loss_e = nn::functional::mse_loss(eager->forward(xe), target);
    Tensor loss_g = nn::functional::mse_loss(graphed->forward(xg), target);
    expect_near(host(loss_g), host(loss_e), 1e-6f);
    loss_e.backward();
    loss_g.backward();
    expect_near(host(xg.grad()), host(xe.grad()), 1e-6f);
    auto pe = eager->parameters(), pg = captured_model->parameters();
    ASSERT_EQ(pe.size(), pg.size());
    for (size_t i = 0; i < pe.size(); ++i) expect_near(host(pg[i].grad()), host(pe[i].grad()), 1e-6f);  // accumulated
  }
  // In the other training mode the module's own forward runs.
  captured_model->eval();
  eager->eval();
  Tensor x = ember::randn({2, 8}, ember::TensorOptions().device(kCuda0));  // another batch size is fine here
  expect_near(host(graphed->forward(x)), host(eager->forward(x)), 1e-6f);
}

TEST(GraphedCallables, BadArgumentsAreRefused) {
  auto model = small_model(1);
  Tensor sample = ember::randn({5, 8}, ember::TensorOptions().device(kCuda0));
  EXPECT_THROW(cuda::make_graphed_callables(model, {}), ember::ValueError);
  EXPECT_THROW(cuda::make_graphed_callables(model, {sample.cpu()}), ember::ValueError);
  auto graphed = cuda::make_graphed_callables(model, {sample});
  EXPECT_THROW(graphed->forward(ember::randn({4, 8}, ember::TensorOptions().device(kCuda0))), ember::ValueError);
}

// A sample that does not require grad: the parameters' gradients still match eager ones;
// an input that requires grad, which the captured backward computes no gradient for, is
// refused rather than left without one.
TEST(GraphedCallables, AnInputWithoutRequiresGradGivesParameterGradientsOnly) {
  auto eager = small_model(6);
  auto captured_model = small_model(6);
  Tensor sample = ember::randn({5, 8}, ember::TensorOptions().device(kCuda0));
  auto graphed = cuda::make_graphed_callables(captured_model, {sample});
  Tensor x = ember::randn({5, 8}, ember::TensorOptions().device(kCuda0));
  nn::functional::mse_loss(eager->forward(x), ember::zeros({5, 4}, ember::TensorOptions().device(kCuda0))).backward();
  nn::functional::mse_loss(graphed->forward(x), ember::zeros({5, 4}, ember::TensorOptions().device(kCuda0))).backward();
  auto pe = eager->parameters(), pg = captured_model->parameters();
  for (size_t i = 0; i < pe.size(); ++i) expect_near(host(pg[i].grad()), host(pe[i].grad()), 1e-6f);
  try {
    graphed->forward(x.clone().requires_grad_(true));
    ADD_FAILURE() << "an input requiring grad was taken by a graph captured without its gradient";
  } catch (const ember::ValueError& e) {
    EXPECT_THAT(e.what(), HasSubstr("requires_grad"));
  }
}

// A module of two inputs (its forward of a vector, which make_graphed_callables calls).
class TwoInputs : public nn::Module {
 public:
  TwoInputs() : nn::Module("TwoInputs") {
    a_ = register_module("a", std::make_shared<nn::Linear>(4, 6));
    b_ = register_module("b", std::make_shared<nn::Linear>(3, 6));
  }
  using nn::Module::forward;
  std::vector<Tensor> forward(const std::vector<Tensor>& inputs) {
    return {a_->forward(inputs.at(0)).tanh() * b_->forward(inputs.at(1))};
  }

 private:
  std::shared_ptr<nn::Linear> a_, b_;
};

std::shared_ptr<TwoInputs> two_inputs(uint64_t seed) {
  ember::manual_seed(seed);
  auto module = std::make_shared<TwoInputs>();
  module->to(kCuda0);
  return module;
}

// Two callables sharing one pool, the second with two inputs (the first's output, which
// requires grad, and a tensor that does not): chained as in a training step, the losses,
// the input's gradient and every parameter's accumulated gradient equal eager ones.
TEST(GraphedCallables, SeveralCallablesWithSeveralInputsEqualEager) {
  auto eager_a = small_model(8), graphed_model_a = small_model(8);
  auto eager_b = two_inputs(9), graphed_model_b = two_inputs(9);
  auto options = ember::TensorOptions().device(kCuda0);
  Tensor sample_a = ember::randn({5, 8}, options).requires_grad_(true);
  Tensor sample_b1 = ember::randn({5, 4}, options).requires_grad_(true);
  Tensor sample_b2 = ember::randn({5, 3}, options);
  auto graphed = cuda::make_graphed_callables({graphed_model_a, graphed_model_b}, {{sample_a}, {sample_b1, sample_b2}});
  ASSERT_EQ(graphed.size(), 2u);
  for (const Tensor& p : graphed_model_b->parameters()) EXPECT_FALSE(p.grad().defined());  // warm-up used grad()

  for (int iteration = 0; iteration < 3; ++iteration) {
    SCOPED_TRACE(iteration);
    Tensor x = ember::randn({5, 8}, options), z = ember::randn({5, 3}, options);
    Tensor target = ember::randn({5, 6}, options);
    Tensor xe = x.clone().requires_grad_(true), xg = x.clone().requires_grad_(true);
    Tensor loss_e = nn::functional::mse_loss(eager_b->forward({eager_a->forward(xe), z}).at(0), target);
    Tensor hidden = graphed[0]({xg}).at(0);
    Tensor loss_g = nn::functional::mse_loss(graphed[1]({hidden, z}).at(0), target);
    expect_near(host(loss_g), host(loss_e), 1e-6f);
    loss_e.backward();
    loss_g.backward();
    expect_near(host(xg.grad()), host(xe.grad()), 1e-6f);
    std::vector<Tensor> pe = eager_a->parameters(), pg = graphed_model_a->parameters();
    for (const Tensor& p : eager_b->parameters()) pe.push_back(p);
    for (const Tensor& p : graphed_model_b->parameters()) pg.push_back(p);
    ASSERT_EQ(pe.size(), pg.size());
    for (size_t i = 0; i < pe.size(); ++i) expect_near(host(pg[i].grad()), host(pe[i].grad()), 1e-6f);
  }
  // The one-input callable's module form replays the same graph.
  Tensor x = ember::randn({5, 8}, options);
  ember::NoGradGuard no_grad;
  expect_near(host(graphed[0].module()->forward(x)), host(eager_a->forward(x)), 1e-6f);
  EXPECT_THROW(graphed[1].module()->forward(x), ember::ValueError);  // two inputs
}

TEST(GraphedCallables, SeveralCallablesRefuseWhatPyTorchRefuses) {
  auto options = ember::TensorOptions().device(kCuda0);
  auto model = small_model(2);
  Tensor sample = ember::randn({5, 8}, options);
  auto expect_message = [](const std::function<void()>& call, const std::string& message) {
    try {
      call();
      ADD_FAILURE() << "no error; expected: " << message;
    } catch (const ember::Error& e) {
      EXPECT_THAT(e.what(), HasSubstr(message));
    }
  };
  expect_message(
      [&] {
        cuda::make_graphed_callables({model, two_inputs(1)}, {{sample}});
      },
      "2 callables but 1 sample_args");
  auto with_buffer = std::make_shared<nn::Linear>(8, 4);
  with_buffer->register_buffer("scale", ember::ones({1}, options).requires_grad_(true));
  with_buffer->to(kCuda0);
  expect_message(
      [&] {
        cuda::make_graphed_callables({with_buffer, model}, {{sample}, {sample}});
      },
      "only parameters may be trainable. All buffers must have ``requires_grad=False``.");
  {
    ember::autocast guard(ember::kCUDA);
    expect_message(
        [&] {
          cuda::make_graphed_callables({model, model}, {{sample}, {sample}});
        },
        "make_graphed_callables does not support the autocast caching. Please set `cache_enabled=False`.");
  }
  // An input the outputs do not use: autograd's error unless allow_unused_input, and then
  // no gradient for it.
  cuda::GraphCallable ignores_second(
      model, [model](const std::vector<Tensor>& in) -> std::vector<Tensor> { return {model->forward(in.at(0))}; });
  Tensor unused = ember::randn({2}, options).requires_grad_(true);
  Tensor used = sample.clone().requires_grad_(true);
  expect_message(
      [&] {
        cuda::make_graphed_callables({ignores_second}, {{used, unused}});
      },
      "One of the differentiated Tensors appears to not have been used in the graph");
  auto graphed = cuda::make_graphed_callables({ignores_second}, {{used, unused}}, 3, /*allow_unused_input=*/true);
  Tensor a = sample.clone().requires_grad_(true), b = ember::randn({2}, options).requires_grad_(true);
  graphed[0]({a, b}).at(0).sum().backward();
  EXPECT_TRUE(a.grad().defined());
  EXPECT_FALSE(b.grad().defined());
  EXPECT_THROW(graphed[0]({a}), ember::ValueError);  // one input short
}

// One training step of a small model: eager (capturable off), then captured whole and
// replayed (capturable on), from the same initial weights and data; the losses must
// match step for step.
template <typename MakeOptimizer>
void captured_step_matches_eager(MakeOptimizer make_optimizer) {
  constexpr int kSteps = 6;
  ember::manual_seed(11);
  std::vector<Tensor> inputs, targets;
  for (int i = 0; i < kSteps; ++i) {
    inputs.push_back(ember::randn({16, 8}, ember::TensorOptions().device(kCuda0)));
    targets.push_back(ember::randn({16, 4}, ember::TensorOptions().device(kCuda0)));
  }
  std::vector<float> eager_losses;
  {
    auto model = small_model(5);
    auto optimizer = make_optimizer(model->parameters(), false);
    for (int i = 0; i < kSteps; ++i) {
      optimizer->zero_grad();
      Tensor loss = nn::functional::mse_loss(model->forward(inputs[i]), targets[i]);
      loss.backward();
      optimizer->step();
      eager_losses.push_back(loss.item<float>());
    }
  }
  std::vector<float> graph_losses;
  auto model = small_model(5);
  auto optimizer = make_optimizer(model->parameters(), true);
  Tensor static_input = inputs[0].clone(), static_target = targets[0].clone();
  // Warm-up: the first step, eager (it creates the optimizer's state).
  optimizer->zero_grad();
  Tensor loss = nn::functional::mse_loss(model->forward(static_input), static_target);
  loss.backward();
  optimizer->step();
  graph_losses.push_back(loss.item<float>());
  cuda::CUDAGraph g;
  Tensor static_loss;
  {
    cuda::graph capture(g);
    optimizer->zero_grad(/*set_to_none=*/true);
    static_loss = nn::functional::mse_loss(model->forward(static_input), static_target);
    static_loss.backward();
    optimizer->step();
  }
  for (int i = 1; i < kSteps; ++i) {
    static_input.copy_(inputs[i]);
    static_target.copy_(targets[i]);
    g.replay();
    graph_losses.push_back(static_loss.item<float>());
  }
  expect_near(graph_losses, eager_losses, 1e-5f);
}

TEST(CapturedTrainingStep, AdamMatchesEager) {
  captured_step_matches_eager([](std::vector<Tensor> params, bool capturable) {
    return std::make_unique<ember::optim::Adam>(std::move(params),
                                                ember::optim::AdamOptions(1e-2).capturable(capturable));
  });
}

TEST(CapturedTrainingStep, AdamWMatchesEager) {
  captured_step_matches_eager([](std::vector<Tensor> params, bool capturable) {
    return std::make_unique<ember::optim::AdamW>(std::move(params),
                                                 ember::optim::AdamWOptions(1e-2).capturable(capturable));
  });
}

TEST(CapturedTrainingStep, SGDWithMomentumMatchesEager) {
  captured_step_matches_eager([](std::vector<Tensor> params, bool capturable) {
    return std::make_unique<ember::optim::SGD>(std::move(params),
                                               ember::optim::SGDOptions(0.05).momentum(0.9).capturable(capturable));
  });
}

TEST(CapturedTrainingStep, OptimizersRefuseUnsafeCaptures) {
  auto model = small_model(2);
  Tensor x = ember::randn({4, 8}, ember::TensorOptions().device(kCuda0));
  auto run = [&](ember::optim::Optimizer& optimizer, const std::string& message) {
    cuda::CUDAGraph g;
    try {
      cuda::graph capture(g);
      model->forward(x).sum().backward();
      optimizer.step();
      ADD_FAILURE() << "no error; expected: " << message;
    } catch (const ember::CudaError& e) {
      EXPECT_THAT(e.what(), HasSubstr(message));
    }
  };
  ember::optim::Adam plain(model->parameters(), ember::optim::AdamOptions());
  run(plain, "Attempting CUDA graph capture of step() for an instance of Adam but param_groups' capturable is False.");
  ember::optim::Adam fresh(model->parameters(), ember::optim::AdamOptions().capturable(true));
  run(fresh, "take a step (warm up) before capturing one");
  // capturable needs CUDA parameters.
  Tensor on_cpu = ember::zeros({2}).requires_grad_(true);
  (on_cpu * 2.0).sum().backward();
  ember::optim::Adam cpu_adam({on_cpu}, ember::optim::AdamOptions().capturable(true));
  EXPECT_THROW(cpu_adam.step(), ember::ValueError);
  EXPECT_EQ(on_cpu.cpu().to_vector<float>(), std::vector<float>(2, 0.0f));
}

// A capturable optimizer's state_dict after replays: the step count is the device's (the
// replays advanced only it); loaded into another capturable optimizer, that one stays
// capturable, continues from that count, and its captured steps match the first one's.
void capturable_state_round_trips(
    const std::function<std::unique_ptr<ember::optim::Optimizer>(std::vector<Tensor>)>& make, bool saves_step) {
  auto model_a = small_model(3);
  auto adam_a = make(model_a->parameters());
  ember::manual_seed(4);
  Tensor input = ember::randn({16, 8}, ember::TensorOptions().device(kCuda0));
  auto train_step = [&](nn::Module& model, ember::optim::Optimizer& optimizer) {
    optimizer.zero_grad(/*set_to_none=*/true);
    Tensor out = model.forward(input);
    (out * out).mean().backward();
    optimizer.step();
  };
  train_step(*model_a, *adam_a);  // warm-up: makes the state
  cuda::CUDAGraph g_a;
  {
    cuda::graph capture(g_a);
    train_step(*model_a, *adam_a);
  }
  for (int i = 0; i < 3; ++i) g_a.replay();
  const nn::StateDict saved = adam_a->state_dict();
  if (saves_step) {
    EXPECT_EQ(saved.at("state.0.step").item<double>(), 4.0);  // 1 eager + 3 replays
  }

  auto model_b = small_model(9);
  model_b->load_state_dict(model_a->state_dict());
  auto adam_b = make(model_b->parameters());
  adam_b->load_state_dict(saved);
  train_step(*model_b, *adam_b);  // eager, from the loaded state
  g_a.replay();
  for (size_t i = 0; i < model_a->parameters().size(); ++i)
    expect_near(host(model_b->parameters()[i]), host(model_a->parameters()[i]), 1e-6f);
  cuda::CUDAGraph g_b;
  try {
    cuda::graph capture(g_b);
    train_step(*model_b, *adam_b);
  } catch (const ember::CudaError& e) {
    FAIL() << "the loaded optimizer refused the capture: " << e.what();
  }
  g_b.replay();
  g_a.replay();
  for (size_t i = 0; i < model_a->parameters().size(); ++i)
    expect_near(host(model_b->parameters()[i]), host(model_a->parameters()[i]), 1e-6f);
  if (saves_step) {
    EXPECT_EQ(adam_b->state_dict().at("state.0.step").item<double>(), 6.0);
  }
}

TEST(CapturedTrainingStep, CapturableAdamStateDictRoundTrip) {
  capturable_state_round_trips(
      [](std::vector<Tensor> params) {
        return std::make_unique<ember::optim::Adam>(std::move(params),
                                                    ember::optim::AdamOptions(1e-2).capturable(true));
      },
      true);
}

TEST(CapturedTrainingStep, CapturableSGDStateDictRoundTrip) {
  capturable_state_round_trips(
      [](std::vector<Tensor> params) {
        return std::make_unique<ember::optim::SGD>(std::move(params),
                                                   ember::optim::SGDOptions(0.05).momentum(0.9).capturable(true));
      },
      false);
}

}  // namespace
