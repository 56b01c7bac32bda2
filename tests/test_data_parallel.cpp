// nn::DataParallel on 4 cuda devices (emulated without a GPU): outputs and gradients equal
// the module's own on one device for a Linear and a small CNN with BatchNorm, whatever
// the batch size; replicas run on threads with their device and its current stream
// current; errors in a replica, a module on the wrong device and replicas that cannot
// match the module are reported as PyTorch's DataParallel reports them.
#include <gtest/gtest.h>

#include <algorithm>
#include <future>
#include <mutex>
#include <thread>
#include <utility>

#include "ember/ember.h"
#include "emulated_support.h"
#include "test_support.h"

namespace ember {
namespace {

using testing::error_of;

// What a Probe saw in one call: the thread's current device and stream, the input.
struct Call {
  int device;
  cuda::Stream stream;
  int64_t batch;
  Device input_device;
  bool grad_enabled;
  std::thread::id thread;
};
std::mutex calls_mutex;
std::vector<Call> calls;

std::vector<Call> take_calls() {
  std::lock_guard lock(calls_mutex);
  std::vector<Call> out = std::move(calls);
  calls.clear();
  std::stable_sort(out.begin(), out.end(), [](const Call& a, const Call& b) { return a.device < b.device; });
  return out;
}

// No clone(): DataParallel makes its replicas with the default constructor.
class Probe : public nn::Module {
 public:
  Probe() { linear = register_module("linear", std::make_shared<nn::Linear>(3, 2)); }
  Tensor forward(const Tensor& x) override {
    {
      std::lock_guard lock(calls_mutex);
      calls.push_back({cuda::current_device(), cuda::current_stream(), x.size(0), x.device(), is_grad_enabled(),
                       std::this_thread::get_id()});
    }
    return linear->forward(x);
  }
  std::shared_ptr<nn::Linear> linear;
};

class FailsOnDevice2 : public nn::Module {
 public:
  FailsOnDevice2() { linear = register_module("linear", std::make_shared<nn::Linear>(3, 2)); }
  Tensor forward(const Tensor& x) override {
    if (x.get_device() == 2) throw IndexError("index 7 is out of bounds for dimension 0 with size 3");
    if (x.get_device() == 3) throw std::out_of_range("vector::at");
    return linear->forward(x);
  }
  std::shared_ptr<nn::Linear> linear;
};

// A default constructor whose module differs from the one given to DataParallel.
class Sized : public nn::Module {
 public:
  explicit Sized(int64_t out = 3) { linear = register_module("linear", std::make_shared<nn::Linear>(2, out)); }
  Tensor forward(const Tensor& x) override { return linear->forward(x); }
  std::shared_ptr<nn::Linear> linear;
};

// Neither clone() nor a default constructor.
class Fixed : public nn::Module {
 public:
  explicit Fixed(int64_t out) { linear = register_module("linear", std::make_shared<nn::Linear>(2, out)); }
  Tensor forward(const Tensor& x) override { return linear->forward(x); }
  std::shared_ptr<nn::Linear> linear;
};

// Derived from a container without a clone() of its own: Sequential's clone() would make a
// Sequential, which runs Sequential's forward.
class DoubledSequential : public nn::Sequential {
 public:
  DoubledSequential() : DoubledSequential(2) {}
  explicit DoubledSequential(int64_t width)
      : nn::Sequential({std::make_shared<nn::Linear>(3, width), std::make_shared<nn::ReLU>()}) {}
  Tensor forward(const Tensor& x) override { return nn::Sequential::forward(x) * 2; }
};
class FixedSequential : public DoubledSequential {
 public:
  explicit FixedSequential(int64_t width) : DoubledSequential(width) {}
};

std::shared_ptr<nn::Sequential> small_cnn() {
  return std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Conv2d>(2, 4, 3, 1, 1), std::make_shared<nn::BatchNorm2d>(4), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::MaxPool2d>(2), std::make_shared<nn::Flatten>(), std::make_shared<nn::Linear>(4 * 4 * 4, 3)});
}

void expect_close(const Tensor& got, const Tensor& expected, double tolerance = 1e-5) {
  ASSERT_EQ(got.sizes(), expected.sizes());
  std::vector<float> a = got.to(kFloat32).cpu().to_vector<float>();
  std::vector<float> b = expected.to(kFloat32).cpu().to_vector<float>();
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], tolerance) << "element " << i;
}

void expect_same_grads(const nn::Module& got, const nn::Module& expected) {
  auto a = got.named_parameters();
  auto b = expected.named_parameters();
  ASSERT_EQ(a.keys(), b.keys());
  for (size_t i = 0; i < a.size(); ++i) {
    SCOPED_TRACE(a.item(i).first);
    ASSERT_TRUE(a.item(i).second.grad().defined());
    EXPECT_TRUE(a.item(i).second.grad().device() == a.item(i).second.device());
    expect_close(a.item(i).second.grad(), b.item(i).second.grad());
  }
}

class DataParallelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    EMBER_REQUIRE_DEVICES(4);
    backends::cuda::matmul.allow_tf32 = false;
    backends::cudnn.allow_tf32 = false;
    manual_seed(0);
    take_calls();
  }
  void TearDown() override {
    backends::cuda::matmul.allow_tf32 = true;
    backends::cudnn.allow_tf32 = true;
  }

  // A default-constructed M on cuda:0 and a second one holding the same state (the
  // single-device reference for classes without clone()).
  template <typename M>
  static std::pair<std::shared_ptr<M>, std::shared_ptr<M>> module_and_copy() {
    auto net = std::make_shared<M>();
    net->to("cuda:0");
    auto copy = std::make_shared<M>();
    copy->load_state_dict(net->state_dict());
    copy->to("cuda:0");
    return {net, copy};
  }

  // Runs `net` through DataParallel and a copy of it (made before) on cuda:0 alone on the
  // same batch and weighted loss; expects the same outputs and gradients.
  template <typename M>
  void expect_matches_one_device(const std::shared_ptr<M>& net, const std::shared_ptr<nn::Module>& reference,
                                 const Tensor& x) {
    nn::DataParallel dp(net, {0, 1, 2, 3}, 0);
    Tensor out = dp(x);
    Tensor expected = (*reference)(x);
    EXPECT_EQ(out.device(), Device("cuda:0"));
    expect_close(out, expected);
    Tensor weights = randn(expected.sizes(), Device("cuda:0"));
    (out * weights).sum().backward();
    (expected * weights).sum().backward();
    expect_same_grads(*net, *reference);
  }
};

TEST_F(DataParallelTest, LinearOutputsAndGradientsEqualOneDevice) {
  auto net = std::make_shared<nn::Linear>(5, 3);
  net->to("cuda:0");
  auto reference = net->clone();
  expect_matches_one_device(net, reference, randn({8, 5}, Device("cuda:0")));
}

// forward_with: a forward of several tensors in and out, scattered and gathered along dim 1
// (a recurrent model's [T, N, ...] layout): outputs and gradients equal one device's.
TEST_F(DataParallelTest, ForwardWithScattersEveryInputAlongItsDim) {
  auto net = std::make_shared<nn::Linear>(5, 3);
  net->to("cuda:0");
  auto reference = net->clone();
  Tensor x = randn({4, 7, 5}, Device("cuda:0")), h = randn({2, 7, 3}, Device("cuda:0"));
  nn::DataParallel dp(net, {0, 1, 2, 3}, 0);
  std::mutex seen_mutex;
  std::vector<std::pair<int64_t, Device>> seen;
  auto step = [&](nn::Module& m, const std::vector<Tensor>& in) {
    {
      std::lock_guard lock(seen_mutex);
      seen.emplace_back(in[1].size(1), in[1].device());
    }
    Tensor y = m(in[0]);
    return std::vector<Tensor>{y, in[1] * 2 + y.sum(0, true)};
  };
  std::vector<Tensor> out = dp.forward_with({x, h}, step, /*dim=*/1);
  std::vector<Tensor> expected = step(*reference, {x, h});
  ASSERT_EQ(out.size(), 2u);
  std::sort(seen.begin(), seen.end(), [](const auto& a, const auto& b) { return a.second.index() < b.second.index(); });
  EXPECT_EQ(seen.size(), 5u);  // four replicas and the reference
  for (int d = 0; d < 4; ++d) EXPECT_EQ(seen[static_cast<size_t>(d) + 1].second.index(), d);
  for (size_t j = 0; j < 2; ++j) {
    EXPECT_EQ(out[j].device(), Device("cuda:0"));
    expect_close(out[j], expected[j]);
  }
  (out[0].mean() + out[1].pow(2).mean()).backward();
  (expected[0].mean() + expected[1].pow(2).mean()).backward();
  expect_same_grads(*net, *reference);
  // A replica returning another count of tensors, and an empty function, are refused.
  auto uneven = [](nn::Module& m, const std::vector<Tensor>& in) {
    return cuda::current_device() == 1 ? std::vector<Tensor>{m(in[0])} : std::vector<Tensor>{m(in[0]), in[0]};
  };
  EXPECT_EQ(error_of<ValueError>([&] { dp.forward_with({x}, uneven, 1); }),
            "DataParallel::forward_with: replica 1 returned 1 tensors and replica 0 2");
  EXPECT_EQ(error_of<ValueError>([&] { dp.forward_with({x}, {}, 1); }),
            "DataParallel::forward_with: the forward function is empty");
}

TEST_F(DataParallelTest, SubclassOfAContainerIsReplicatedByItsDefaultConstructor) {
  auto [net, reference] = module_and_copy<DoubledSequential>();
  expect_matches_one_device(net, reference, randn({8, 3}, Device("cuda:0")));
}

TEST_F(DataParallelTest, GraphRunsThroughGatherAndBroadcast) {
  auto net = std::make_shared<nn::Linear>(5, 3);
  net->to("cuda:0");
  nn::DataParallel dp(net);
  EXPECT_EQ(dp.device_ids(), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(dp.output_device(), 0);
  Tensor out = dp(randn({8, 5}, Device("cuda:0")));
  ASSERT_TRUE(out.requires_grad());
  EXPECT_NE(out.grad_fn()->name().find("Gather"), std::string::npos) << out.grad_fn()->name();
  // The module is a child named "module", as in PyTorch's state_dict keys.
  EXPECT_EQ(dp.state_dict().keys(), (std::vector<std::string>{"module.weight", "module.bias"}));
}

TEST_F(DataParallelTest, SmallCnnInEvalModeEqualsOneDevice) {
  auto net = small_cnn();
  net->to("cuda:0");
  auto bn = std::dynamic_pointer_cast<nn::BatchNorm2d>((*net)[1]);
  bn->running_mean.copy_(randn({4}));
  bn->running_var.copy_(rand({4}) + 0.5);
  net->eval();
  auto reference = net->clone();
  expect_matches_one_device(net, reference, randn({8, 2, 8, 8}, Device("cuda:0")));
}

// PyTorch's DataParallel in training mode: each replica normalises its chunk with the
// chunk's statistics, and the running statistics are replica 0's (it shares the module's
// buffers); the other replicas' updates are dropped with them.
TEST_F(DataParallelTest, SmallCnnInTrainModeNormalisesEachChunk) {
  auto net = small_cnn();
  net->to("cuda:0");
  auto per_chunk = net->clone();
  auto first_chunk_only = std::dynamic_pointer_cast<nn::Sequential>(net->clone());
  Tensor x = randn({10, 2, 8, 8}, Device("cuda:0"));

  nn::DataParallel dp(net, {0, 1, 2, 3}, 0);
  Tensor out = dp(x);
  std::vector<Tensor> expected_parts;
  for (const Tensor& chunk : x.chunk(4, 0)) expected_parts.push_back((*per_chunk)(chunk));
  Tensor expected = cat(expected_parts, 0);
  expect_close(out, expected);
  Tensor weights = randn(expected.sizes(), Device("cuda:0"));
  (out * weights).sum().backward();
  (expected * weights).sum().backward();
  expect_same_grads(*net, *per_chunk);

  (*first_chunk_only)(x.narrow(0, 0, 3));
  auto bn = std::dynamic_pointer_cast<nn::BatchNorm2d>((*net)[1]);
  auto bn_expected = std::dynamic_pointer_cast<nn::BatchNorm2d>((*first_chunk_only)[1]);
  expect_close(bn->running_mean, bn_expected->running_mean);
  expect_close(bn->running_var, bn_expected->running_var);
  EXPECT_EQ(bn->num_batches_tracked.item<int64_t>(), 1);
}

TEST_F(DataParallelTest, BatchNotDivisibleByTheDeviceCount) {
  auto [net, reference] = module_and_copy<Probe>();
  expect_matches_one_device(net, reference, randn({10, 3}, Device("cuda:0")));
  std::vector<Call> seen = take_calls();
  ASSERT_EQ(seen.size(), 5u);  // 4 replicas, then the reference
  std::vector<int64_t> batches;
  for (const Call& c : seen) batches.push_back(c.batch);
  EXPECT_EQ(batches, (std::vector<int64_t>{3, 10, 3, 3, 1}));  // sorted by device: two calls on cuda:0
}

TEST_F(DataParallelTest, BatchSmallerThanTheDeviceCountUsesFewerReplicas) {
  for (int64_t batch : {2, 1}) {
    SCOPED_TRACE(batch);
    take_calls();
    auto [net, reference] = module_and_copy<Probe>();
    nn::DataParallel dp(net);
    Tensor x = randn({batch, 3}, Device("cuda:0"));
    Tensor out = dp(x);
    std::vector<Call> seen = take_calls();
    ASSERT_EQ(seen.size(), static_cast<size_t>(batch));
    for (int64_t i = 0; i < batch; ++i) {
      EXPECT_EQ(seen[static_cast<size_t>(i)].device, i);
      EXPECT_EQ(seen[static_cast<size_t>(i)].batch, 1);
      EXPECT_EQ(seen[static_cast<size_t>(i)].input_device, Device(kCUDA, static_cast<int>(i)));
    }
    // One replica runs in the calling thread, as PyTorch's parallel_apply.
    if (batch == 1) EXPECT_EQ(seen[0].thread, std::this_thread::get_id());
    else EXPECT_NE(seen[0].thread, std::this_thread::get_id());
    Tensor expected = (*reference)(x);
    expect_close(out, expected);
    out.sum().backward();
    expected.sum().backward();
    expect_same_grads(*net, *reference);
  }
}

TEST_F(DataParallelTest, GradientsAccumulateOnTheModuleAcrossBackwardCalls) {
  auto net = std::make_shared<nn::Linear>(4, 2);
  net->to("cuda:0");
  auto reference = net->clone();
  nn::DataParallel dp(net);
  Tensor x1 = randn({6, 4}, Device("cuda:0"));
  Tensor x2 = randn({6, 4}, Device("cuda:0"));
  dp(x1).pow(2).sum().backward();
  dp(x2).pow(2).sum().backward();
  // Two forward calls before one backward: each graph keeps its own replicas.
  Tensor both = dp(x1).pow(2).sum() + dp(x2).pow(2).sum();
  both.backward();
  for (int k = 0; k < 2; ++k) {
    (*reference)(x1).pow(2).sum().backward();
    (*reference)(x2).pow(2).sum().backward();
  }
  expect_same_grads(*net, *reference);
}

TEST_F(DataParallelTest, InputGradientsFlowBackThroughScatter) {
  auto net = std::make_shared<nn::Linear>(4, 2);
  net->to("cuda:0");
  nn::DataParallel dp(net);
  for (Device device : {Device("cuda:0"), Device("cuda:3"), Device(kCPU)}) {
    SCOPED_TRACE(device.str());
    Tensor x = randn({7, 4}, device).requires_grad_();
    Tensor x_reference = x.detach().requires_grad_();
    dp(x).pow(2).sum().backward();
    (*net)(x_reference.to("cuda:0")).pow(2).sum().backward();
    ASSERT_TRUE(x.grad().defined());
    EXPECT_EQ(x.grad().device(), device);
    expect_close(x.grad(), x_reference.grad());
  }
}

TEST_F(DataParallelTest, FrozenParametersGetNoGradient) {
  auto net = std::make_shared<nn::Linear>(4, 2);
  net->to("cuda:0");
  net->bias.requires_grad_(false);
  nn::DataParallel dp(net);
  dp(randn({8, 4}, Device("cuda:0"))).sum().backward();
  EXPECT_TRUE(net->weight.grad().defined());
  EXPECT_FALSE(net->bias.grad().defined());
}

TEST_F(DataParallelTest, NoGradRecordsNothing) {
  auto net = std::make_shared<Probe>();
  net->to("cuda:0");
  nn::DataParallel dp(net);
  Tensor x = randn({8, 3}, Device("cuda:0"));
  Tensor expected = (*net)(x).detach();
  take_calls();
  NoGradGuard no_grad;
  Tensor out = dp(x);
  EXPECT_FALSE(out.requires_grad());
  expect_close(out, expected);
  for (const Call& c : take_calls()) EXPECT_FALSE(c.grad_enabled);
}

TEST_F(DataParallelTest, OutputDevice) {
  auto net = std::make_shared<nn::Linear>(4, 2);
  net->to("cuda:0");
  auto reference = net->clone();
  Tensor x = randn({8, 4}, Device("cuda:0"));
  nn::DataParallel on_1(net, {0, 1, 2, 3}, 1);
  EXPECT_EQ(on_1(x).device(), Device("cuda:1"));
  nn::DataParallel on_cpu(net, {0, 1, 2, 3}, -1);
  Tensor out = on_cpu(x);
  EXPECT_TRUE(out.is_cpu());
  out.sum().backward();
  (*reference)(x).sum().backward();
  expect_same_grads(*net, *reference);
}

TEST_F(DataParallelTest, CpuInputIsScatteredToTheDevices) {
  auto net = std::make_shared<nn::Linear>(4, 2);
  net->to("cuda:0");
  auto reference = net->clone();
  Tensor x = randn({8, 4});
  nn::DataParallel dp(net);
  Tensor out = dp(x);
  expect_close(out, (*reference)(x.to("cuda:0")));
}

TEST_F(DataParallelTest, ReplicaErrorsAreRethrownWithTheirType) {
  auto net = std::make_shared<FailsOnDevice2>();
  net->to("cuda:0");
  nn::DataParallel dp(net, {0, 1, 2}, 0);
  try {
    dp(randn({6, 3}, Device("cuda:0")));
    ADD_FAILURE() << "expected IndexError";
  } catch (const IndexError& e) {
    EXPECT_EQ(std::string(e.what()),
              "Caught IndexError in replica 2 on device 2.\nindex 7 is out of bounds for dimension 0 with size 3");
  }
  nn::DataParallel four(net, {0, 1, 2, 3}, 0);
  // The first failing replica by order is reported; a standard type keeps its type too.
  EXPECT_EQ(error_of<IndexError>([&] {
              four(randn({8, 3}, Device("cuda:0")));
            }).rfind("Caught IndexError in replica 2", 0),
            0u);
  nn::DataParallel skip_2(net, {0, 1, 3}, 0);
  EXPECT_EQ(error_of<std::out_of_range>([&] {
              skip_2(randn({6, 3}, Device("cuda:0")));
            }),
            "Caught std::out_of_range in replica 2 on device 3.\nvector::at");
}

TEST_F(DataParallelTest, ModuleMustBeOnTheFirstDevice) {
  auto net = std::make_shared<nn::Linear>(4, 2);
  nn::DataParallel dp(net, {0, 1}, 0);
  Tensor x = randn({4, 4}, Device("cuda:0"));
  EXPECT_EQ(error_of<DeviceError>([&] { dp(x); }),
            "module must have its parameters and buffers on device cuda:0 (device_ids[0]) but found one of them on "
            "device: cpu");
  net->to("cuda:1");
  EXPECT_EQ(error_of<DeviceError>([&] { dp(x); }),
            "module must have its parameters and buffers on device cuda:0 (device_ids[0]) but found one of them on "
            "device: cuda:1");
  EXPECT_FALSE(net->weight.grad().defined());
  // One device: the constructor moves the module there, as PyTorch's.
  nn::DataParallel single(net, {2});
  EXPECT_EQ(net->weight.device(), Device("cuda:2"));
  EXPECT_EQ(single(x).device(), Device("cuda:2"));
}

TEST_F(DataParallelTest, BadDevicesAndReplicasAreRejectedAtConstruction) {
  auto net = std::make_shared<nn::Linear>(4, 2);
  net->to("cuda:0");
  EXPECT_EQ(error_of<IndexError>([&] {
              nn::DataParallel dp(net, {0, 9});
            }),
            "Device index value 9 is out of index range [0, 4)");
  EXPECT_EQ(error_of<IndexError>([&] {
              nn::DataParallel dp(net, {0, 1}, 7);
            }),
            "Device index value 7 is out of index range [0, 4)");

  auto sized = std::make_shared<Sized>(5);
  EXPECT_EQ(error_of<ValueError>([&] {
              nn::DataParallel dp(sized, {0, 1});
            }),
            "DataParallel: the replica of Sized made by its default constructor does not match the module: "
            "parameter linear.weight has shape [5, 2] in the module but [3, 2] in the replica (override clone() to "
            "make replicas of it)");
  auto fixed = std::make_shared<Fixed>(3);
  EXPECT_EQ(error_of<Error>([&] {
              nn::DataParallel dp(fixed, {0, 1});
            }),
            "clone() is not implemented for Fixed; the built-in modules implement it, a custom module may override it");
  auto fixed_sequential = std::make_shared<FixedSequential>(2);
  EXPECT_EQ(error_of<ValueError>([&] {
              nn::DataParallel dp(fixed_sequential, {0, 1});
            }),
            "DataParallel: clone() of FixedSequential made a Sequential; override clone() in FixedSequential or "
            "give it a default constructor");
  // Through a pointer to the base class, the dynamic type's clone() is used.
  std::shared_ptr<nn::Module> base = small_cnn();
  base->to("cuda:0");
  nn::DataParallel dp(base, {0, 1});
  EXPECT_EQ(dp(randn({2, 2, 8, 8}, Device("cuda:0"))).sizes(), (IntList{2, 3}));
}

TEST_F(DataParallelTest, MakingReplicasDrawsNoRandomNumbers) {
  auto net = std::make_shared<Probe>();  // replicas run Linear's random initialisation
  net->to("cuda:0");
  nn::DataParallel dp(net);
  Tensor x = randn({8, 3}, Device("cuda:0"));
  manual_seed(5);
  Tensor expected = rand({4});
  manual_seed(5);
  dp(x);
  expect_close(rand({4}), expected, 0.0);
}

// Each replica runs with, current on its device, the stream current there in the caller:
// with device 2's work held back behind a closed gate on a side stream, the replica on
// device 2 is queued on that stream and the result is right once the gate opens.
TEST_F(DataParallelTest, ReplicasRunOnTheCallersCurrentStreams) {
  EMBER_REQUIRE_EMULATED();
  auto [net, reference] = module_and_copy<Probe>();
  nn::DataParallel dp(net);
  Tensor x = randn({8, 3}, Device("cuda:0"));
  cuda::Stream side(2);
  std::promise<void> gate;
  std::shared_future<void> opened = gate.get_future().share();
  testing::on_stream(side, [opened] { opened.wait(); });
  Tensor out;
  {
    cuda::StreamGuard guard(side);
    out = dp(x);
  }
  EXPECT_FALSE(side.query());
  gate.set_value();
  std::vector<Call> seen = take_calls();
  ASSERT_EQ(seen.size(), 4u);
  for (const Call& c : seen) {
    EXPECT_EQ(c.input_device, Device(kCUDA, c.device));
    EXPECT_EQ(c.stream, c.device == 2 ? side : cuda::default_stream(c.device)) << "device " << c.device;
    EXPECT_NE(c.thread, std::this_thread::get_id());
  }
  expect_close(out, (*reference)(x));
}

// The stream sanitizer finds no unordered access in a forward and backward whose replicas
// run on side streams of the caller, nor in reading the gradients afterwards.
TEST_F(DataParallelTest, SideStreamsAreRaceFreeUnderTheStreamSanitizer) {
  const bool was_enabled = cuda::sanitizer::is_enabled();
  const auto was_mode = cuda::sanitizer::mode();
  cuda::sanitizer::enable();
  auto net = small_cnn();
  net->to("cuda:0");
  net->eval();
  auto reference = net->clone();
  nn::DataParallel dp(net);
  Tensor x = randn({8, 2, 8, 8}, Device("cuda:0"));
  cuda::Stream side1(1), side3(3);
  Tensor out;
  {
    cuda::StreamGuard guard1(side1);
    cuda::StreamGuard guard3(side3);
    out = dp(x);
  }
  out.sum().backward();  // on the default streams: the replicas' backward stays on the side streams
  (*reference)(x).sum().backward();
  expect_same_grads(*net, *reference);
  for (int d = 0; d < 4; ++d) cuda::synchronize(d);
  if (was_enabled) cuda::sanitizer::enable(was_mode);
  else cuda::sanitizer::disable();
}

}  // namespace
}  // namespace ember
