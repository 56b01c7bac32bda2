// Generators (include/ember/generator.h): ember::Generator, each device's default generator,
// seeding and states, and the random ops, samplers and DataLoader that take a generator. Run
// on the cpu and on two emulated cuda devices. PyTorch's facts used: a fresh generator's seed
// is 67280421310721 (torch.Generator().initial_seed() in PyTorch 1.13, /usr/bin/python3), a
// CUDA generator's state is 16 bytes (seed, offset), a draw with a generator leaves the
// default generator where it was, and the error texts of torch's generator checks.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "ember/ember.h"

using namespace ember;

namespace {

constexpr size_t MiB = size_t{1} << 20;
const bool kEmulated = [] {
  cuda::emulate(2, 64 * MiB);
  return true;
}();

template <typename E>
void expect_error(const std::function<void()>& call, const std::string& message) {
  try {
    call();
    ADD_FAILURE() << "no error; expected: " << message;
  } catch (const E& e) {
    EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
  }
}

std::vector<float> values(const Tensor& t) { return t.cpu().to(kFloat32).to_vector<float>(); }

// A generator's Philox offset: the second half of its state (torch.Generator.get_offset).
uint64_t offset_of(const Generator& g) {
  uint64_t offset = 0;
  std::memcpy(&offset, g.get_state().data_ptr<uint8_t>() + 8, 8);
  return offset;
}

// A new generator on a copy of `g`'s state (torch.Generator.clone_state).
Generator clone_of(const Generator& g) {
  Generator copy(g.device());
  copy.set_state(g.get_state());
  return copy;
}

TEST(Generator, AFreshGeneratorHasPyTorchsDefaultSeed) {
  Generator g;
  EXPECT_EQ(g.initial_seed(), 67280421310721ull);
  EXPECT_TRUE(g.device().is_cpu());
  EXPECT_EQ(&g.manual_seed(7), &g);
  EXPECT_EQ(g.initial_seed(), 7u);
  const uint64_t fresh = g.seed();
  EXPECT_EQ(g.initial_seed(), fresh);
  Generator on_cuda(Device("cuda:1"));
  EXPECT_EQ(on_cuda.device(), Device("cuda:1"));
  EXPECT_EQ(on_cuda.initial_seed(), 67280421310721ull);
}

TEST(Generator, ASeedGivesTheSameNumbersOnEveryDevice) {
  ASSERT_TRUE(kEmulated);
  Generator cpu_gen, cuda_gen(Device("cuda:0"));
  cpu_gen.manual_seed(11);
  cuda_gen.manual_seed(11);
  Tensor a = randn({64}, {}, cpu_gen);
  Tensor b = randn({64}, TensorOptions().device("cuda:0"), cuda_gen);
  EXPECT_EQ(values(a), values(b));
  // The same seed again: the same stream from its start.
  cpu_gen.manual_seed(11);
  EXPECT_EQ(values(randn({64}, {}, cpu_gen)), values(a));
}

TEST(Generator, DrawingFromAGeneratorLeavesTheDefaultGeneratorWhereItWas) {
  manual_seed(5);
  Tensor expected = rand({16});
  Tensor expected_cuda = rand({16}, TensorOptions().device("cuda:0"));
  manual_seed(5);
  Generator g(Device("cuda:0"));
  Generator h;
  rand({100}, TensorOptions().device("cuda:0"), g);
  Tensor x = empty({100});
  x.uniform_(0, 1, h).normal_(0, 1, h);
  EXPECT_EQ(values(rand({16})), values(expected));
  EXPECT_EQ(values(rand({16}, TensorOptions().device("cuda:0"))), values(expected_cuda));
}

TEST(Generator, CopiesShareOneState) {
  Generator g;
  g.manual_seed(3);
  Generator copy = g;
  EXPECT_TRUE(copy == g);
  Tensor first = rand({8}, {}, copy);
  Tensor second = rand({8}, {}, g);  // continues after the copy's draw
  g.manual_seed(3);
  EXPECT_EQ(values(rand({8}, {}, g)), values(first));
  EXPECT_EQ(values(rand({8}, {}, g)), values(second));
  EXPECT_FALSE(Generator() == g);
}

TEST(Generator, StateRoundTripsAndThroughACheckpoint) {
  Generator g(Device("cuda:1"));
  g.manual_seed(42);
  rand({10}, TensorOptions().device("cuda:1"), g);
  Tensor state = g.get_state();
  EXPECT_EQ(state.dtype(), kUInt8);
  EXPECT_TRUE(state.device().is_cpu());
  EXPECT_EQ(state.numel(), 16);
  Tensor next = randn({32}, TensorOptions().device("cuda:1"), g);
  g.set_state(state);
  EXPECT_EQ(values(randn({32}, TensorOptions().device("cuda:1"), g)), values(next));

  const std::string path = ::testing::TempDir() + "generator_state.safetensors";
  nn::StateDict saved;
  saved.insert("rng", state);
  save(saved, path);
  Generator restored(Device("cuda:1"));
  restored.set_state(load(path).at("rng"));
  EXPECT_EQ(restored.initial_seed(), 42u);
  EXPECT_EQ(values(randn({32}, TensorOptions().device("cuda:1"), restored)), values(next));
  std::remove(path.c_str());
}

TEST(Generator, ABadStateIsRefusedAndChangesNothing) {
  Generator g;
  g.manual_seed(9);
  Tensor state = g.get_state();
  expect_error<TypeError>([&] { g.set_state(state.to(kFloat32)); }, "RNG state must be a torch.ByteTensor");
  expect_error<TypeError>([&] { g.set_state(state.to(Device("cuda:0"))); }, "RNG state must be a torch.ByteTensor");
  expect_error<TypeError>([&] { g.set_state(Tensor()); }, "RNG state must be a torch.ByteTensor");
  expect_error<ValueError>([&] { g.set_state(zeros({15}, TensorOptions(kUInt8))); }, "RNG state is wrong size");
  Tensor odd = state.clone();
  odd.data_ptr<uint8_t>()[8] = 1;  // offset 1
  expect_error<ValueError>([&] { g.set_state(odd); }, "offset must be a multiple of 4");
  EXPECT_EQ(g.initial_seed(), 9u);
  EXPECT_EQ(values(g.get_state()), values(state));
}

TEST(Generator, AGeneratorOfAnotherDeviceTypeIsRefused) {
  Generator cpu_gen, cuda_gen(Device("cuda:0"));
  Tensor on_cuda = empty({4}, TensorOptions().device("cuda:0"));
  expect_error<DeviceError>([&] { on_cuda.uniform_(0, 1, cpu_gen); },
                            "Expected a 'cuda' device type for generator but found 'cpu'");
  expect_error<DeviceError>([&] { randn({4}, {}, cuda_gen); },
                            "Expected a 'cpu' device type for generator but found 'cuda'");
  expect_error<DeviceError>([&] { multinomial(ones({3}), 2, false, cuda_gen); },
                            "Expected a 'cpu' device type for generator but found 'cuda'");
  // PyTorch checks the type only: a cuda:1 generator draws for a cuda:0 tensor.
  Generator other(Device("cuda:1"));
  EXPECT_NO_THROW(on_cuda.normal_(0, 1, other));
}

TEST(DefaultGenerators, EachCudaDeviceHasItsOwn) {
  cuda::manual_seed_all(1);
  Tensor zero_first = rand({8}, TensorOptions().device("cuda:0"));
  Tensor one_first = rand({8}, TensorOptions().device("cuda:1"));
  EXPECT_EQ(values(zero_first), values(one_first));  // one seed, separate streams
  {
    cuda::DeviceGuard guard(1);
    cuda::manual_seed(2);  // the current device only
    EXPECT_EQ(cuda::initial_seed(), 2u);
  }
  EXPECT_EQ(default_generator(Device("cuda:0")).initial_seed(), 1u);
  EXPECT_EQ(default_generator(Device("cuda:1")).initial_seed(), 2u);
  // Device 0's stream went on; device 1's restarted from its new seed.
  EXPECT_NE(values(rand({8}, TensorOptions().device("cuda:0"))), values(zero_first));
  Generator two(Device("cuda:1"));
  two.manual_seed(2);
  EXPECT_EQ(values(rand({8}, TensorOptions().device("cuda:1"))),
            values(rand({8}, TensorOptions().device("cuda:1"), two)));
  EXPECT_TRUE(default_generator(Device("cuda:0")) == default_generator(Device("cuda:0")));
  expect_error<DeviceError>([] { default_generator(Device("cuda:5")); }, "Invalid device index 5");
}

TEST(DefaultGenerators, ManualSeedSeedsTheCpuAndEveryDevice) {
  manual_seed(77);
  EXPECT_EQ(initial_seed(), 77u);
  EXPECT_EQ(default_generator(Device("cuda:0")).initial_seed(), 77u);
  EXPECT_EQ(default_generator(Device("cuda:1")).initial_seed(), 77u);
  cuda::manual_seed_all(78);
  EXPECT_EQ(initial_seed(), 77u);  // the cpu's is not a cuda device's
  EXPECT_EQ(default_generator(Device("cuda:1")).initial_seed(), 78u);
  const uint64_t fresh = seed();
  EXPECT_EQ(initial_seed(), fresh);
  EXPECT_EQ(default_generator(Device("cuda:0")).initial_seed(), fresh);
}

TEST(DefaultGenerators, RngStatesSaveAndRestoreEveryDevice) {
  manual_seed(4);
  rand({3});
  rand({5}, TensorOptions().device("cuda:1"));
  Tensor cpu_state = get_rng_state();
  std::vector<Tensor> cuda_states = cuda::get_rng_state_all();
  ASSERT_EQ(cuda_states.size(), 2u);
  Tensor a = rand({6}), b = rand({6}, TensorOptions().device("cuda:0"));
  Tensor c = rand({6}, TensorOptions().device("cuda:1"));
  set_rng_state(cpu_state);
  cuda::set_rng_state_all(cuda_states);
  EXPECT_EQ(values(rand({6})), values(a));
  EXPECT_EQ(values(rand({6}, TensorOptions().device("cuda:0"))), values(b));
  EXPECT_EQ(values(rand({6}, TensorOptions().device("cuda:1"))), values(c));
  cuda::set_rng_state(cuda_states[1], 1);
  EXPECT_EQ(values(cuda::get_rng_state(1)), values(cuda_states[1]));
  // A list of the wrong length, or with one bad state, changes no device.
  expect_error<ValueError>([&] { cuda::set_rng_state_all({cuda_states[0]}); }, "1 states for 2 cuda devices");
  Tensor before = cuda::get_rng_state(0);
  expect_error<ValueError>(
      [&] {
        cuda::set_rng_state_all({cuda_states[1], zeros({3}, TensorOptions(kUInt8))});
      },
      "RNG state is wrong size");
  EXPECT_EQ(values(cuda::get_rng_state(0)), values(before));
}

TEST(Generator, DropoutAndMultinomialTakeOne) {
  Tensor x = ones({256}, TensorOptions().device("cuda:0"));
  Generator g(Device("cuda:0"));
  g.manual_seed(21);
  Tensor first = nn::functional::dropout(x, 0.5, true, g);
  g.manual_seed(21);
  EXPECT_EQ(values(nn::functional::dropout(x, 0.5, true, g)), values(first));
  Tensor probs = ones({4, 10});
  Generator h;
  h.manual_seed(8);
  Tensor drawn = multinomial(probs, 5, false, h);
  h.manual_seed(8);
  EXPECT_TRUE(equal(probs.multinomial(5, false, h), drawn));
}

TEST(Generator, ConcurrentDrawsReserveDisjointCounters) {
  Generator g;
  g.manual_seed(13);
  constexpr int kThreads = 4, kDraws = 25;
  std::vector<std::vector<float>> firsts(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kDraws; ++i) firsts[t].push_back(values(rand({64}, {}, g))[0]);
    });
  }
  for (std::thread& thread : threads) thread.join();
  std::vector<float> concurrent;
  for (const auto& f : firsts) concurrent.insert(concurrent.end(), f.begin(), f.end());
  g.manual_seed(13);
  std::vector<float> sequential;
  for (int i = 0; i < kThreads * kDraws; ++i) sequential.push_back(values(rand({64}, {}, g))[0]);
  std::sort(concurrent.begin(), concurrent.end());
  std::sort(sequential.begin(), sequential.end());
  EXPECT_EQ(concurrent, sequential);  // the same draws, each once
}

TEST(Generator, AnUnregisteredGeneratorCannotBeDrawnFromUnderCapture) {
  Tensor x = empty({4}, TensorOptions().device("cuda:0"));
  Generator g(Device("cuda:0"));
  const uint64_t offset = offset_of(g);
  cuda::Stream side(0);
  side.wait_stream(cuda::current_stream(0));
  cuda::CUDAGraph graph;
  {
    cuda::StreamGuard guard(side);
    graph.capture_begin();
    // PyTorch's message (CUDAGeneratorState::increase).
    expect_error<CudaError>([&] { x.uniform_(0, 1, g); },
                            "Attempt to increase offset for a CUDA generator not in capture mode.");
    x.uniform_(0, 1);  // the default generator: registered by capture_begin
    graph.capture_end();
  }
  EXPECT_EQ(offset_of(g), offset);  // the refused draw reserved nothing
  cuda::current_stream(0).wait_stream(side);
  graph.replay();
  std::vector<float> first = values(x);
  graph.replay();
  EXPECT_NE(values(x), first);  // new numbers per replay
}

// nn::init's random fills take a generator (PyTorch 2.x's generator= argument): the numbers are
// the generator's, as Tensor::uniform_/normal_ would draw them, and the default generator stays.
TEST(Generator, NnInitDrawsFromTheGivenGenerator) {
  for (const char* device : {"cpu", "cuda:1"}) {
    SCOPED_TRACE(device);
    const TensorOptions on(device);
    manual_seed(5);
    Tensor before = rand({6}, on);
    manual_seed(5);
    Generator gen{Device(device)}, same{Device(device)};
    gen.manual_seed(11);
    same.manual_seed(11);
    Tensor w = empty({8, 4}, on);
    nn::init::kaiming_uniform_(w, 0, "fan_in", "relu", gen);
    const double bound = std::sqrt(2.0) * std::sqrt(3.0 / 4);
    Tensor expected = empty({8, 4}, on).uniform_(-bound, bound, same);
    EXPECT_EQ(values(w), values(expected));
    nn::init::xavier_normal_(w, 1.0, gen);
    EXPECT_EQ(values(w), values(empty({8, 4}, on).normal_(0, std::sqrt(2.0 / 12), same)));
    nn::init::normal_(w, 1, 2, gen);
    nn::init::uniform_(w, -1, 1, gen);
    nn::init::kaiming_normal_(w, 0, "fan_out", "leaky_relu", gen);
    nn::init::xavier_uniform_(w, 1.0, gen);
    EXPECT_EQ(values(rand({6}, on)), values(before));  // the default generator did not move
  }
  Tensor on_cpu = empty({8, 4});
  expect_error<DeviceError>([&] { nn::init::xavier_uniform_(on_cpu, 1.0, Generator(Device("cuda:0"))); },
                            "Expected a 'cpu' device type for generator but found 'cuda'");
}

// register_generator_state: a captured op drawing from a registered generator draws, on
// each replay, what the same draws issued eagerly would (the cpu generator of the same seed
// included: same numbers on every backend), and each replay advances the generator's offset
// as they would. The capture itself draws nothing, and the default generator, registered
// but not drawn from, does not move.
TEST(GraphGenerators, ARegisteredGeneratorDrawsNewNumbersOnEachReplay) {
  auto options = TensorOptions().device("cuda:0");
  Tensor x = empty({6}, options), y = empty({5}, options);
  Generator g(Device("cuda:0"));
  g.manual_seed(21);
  const uint64_t default_offset = offset_of(default_generator(Device("cuda:0")));
  cuda::CUDAGraph graph;
  graph.register_generator_state(g);
  graph.register_generator_state(g);  // once is enough; twice is no error
  cuda::Stream side(0);
  side.wait_stream(cuda::current_stream(0));
  {
    cuda::StreamGuard guard(side);
    graph.capture_begin();
    x.uniform_(0, 1, g);
    y.normal_(0, 1, g);
    graph.capture_end();
  }
  cuda::current_stream(0).wait_stream(side);
  EXPECT_EQ(offset_of(g), 0u);  // captured, not drawn
  Generator eager(Device("cuda:0")), cpu;
  eager.manual_seed(21);
  cpu.manual_seed(21);
  std::vector<float> previous;
  for (int replay = 0; replay < 3; ++replay) {
    SCOPED_TRACE(replay);
    graph.replay();
    Tensor ex = rand({6}, options, eager), ey = randn({5}, options, eager);
    Tensor cx = rand({6}, {}, cpu), cy = randn({5}, {}, cpu);
    EXPECT_EQ(values(x), values(ex));
    EXPECT_EQ(values(y), values(ey));
    EXPECT_EQ(values(x), values(cx));
    EXPECT_EQ(values(y), values(cy));
    EXPECT_EQ(offset_of(g), offset_of(eager));
    EXPECT_EQ(offset_of(g), static_cast<uint64_t>(replay + 1) * (4 * 6 + 4 * 5));
    EXPECT_NE(values(x), previous);
    previous = values(x);
  }
  EXPECT_EQ(offset_of(default_generator(Device("cuda:0"))), default_offset);
  // Restoring the generator's state between replays makes the next replay repeat a draw.
  Tensor state = g.get_state();
  graph.replay();
  std::vector<float> drawn = values(x);
  g.set_state(state);
  graph.replay();
  EXPECT_EQ(values(x), drawn);
}

// Dropout given a registered generator: each replay draws a new mask, the one eager
// dropout draws from the same generator state.
TEST(GraphGenerators, CapturedDropoutWithARegisteredGeneratorDrawsANewMaskPerReplay) {
  auto options = TensorOptions().device("cuda:0");
  Tensor x = ones({64}, options), out;
  Generator g(Device("cuda:0")), eager(Device("cuda:0"));
  g.manual_seed(8);
  eager.manual_seed(8);
  cuda::CUDAGraph graph;
  graph.register_generator_state(g);
  {
    cuda::graph capture(graph);
    out = nn::functional::dropout(x, 0.5, /*training=*/true, g);
  }
  std::vector<float> previous;
  for (int replay = 0; replay < 2; ++replay) {
    graph.replay();
    EXPECT_EQ(values(out), values(nn::functional::dropout(x, 0.5, true, eager)));
    EXPECT_NE(values(out), previous);
    previous = values(out);
  }
}

// PyTorch's test_graphsafe_set_get_rng_state: a generator switched between two registered
// states during the capture (graphsafe_set_state) draws from each as the same switches do
// eagerly, on every replay, and both states end at the eager offsets.
TEST(GraphGenerators, SwitchingGraphSafeStatesDuringCaptureReplaysAsEager) {
  auto options = TensorOptions().device("cuda:0");
  auto make_states = [](Generator generator) {
    generator.manual_seed(0);
    Generator old_state = generator.graphsafe_get_state();
    Generator new_state = clone_of(generator);
    return std::array<Generator, 3>{generator, old_state, new_state};
  };
  auto steps = [&](std::array<Generator, 3>& s) {
    std::vector<Tensor> drawn;
    s[0].graphsafe_set_state(s[2]);
    drawn.push_back(rand({5}, options, s[0]));
    s[0].graphsafe_set_state(s[1]);
    drawn.push_back(rand({5}, options, s[0]));
    drawn.push_back(rand({5}, options, s[0]));
    return drawn;
  };
  std::array<Generator, 3> eager = make_states(Generator(Device("cuda:0")));
  std::array<Generator, 3> captured = make_states(Generator(Device("cuda:0")));
  cuda::CUDAGraph graph;
  graph.register_generator_state(captured[1]);
  graph.register_generator_state(captured[2]);
  cuda::Stream side(0);
  side.wait_stream(cuda::current_stream(0));
  std::vector<Tensor> static_outputs;
  {
    cuda::StreamGuard guard(side);
    graph.capture_begin();
    static_outputs = steps(captured);
    graph.capture_end();
  }
  cuda::current_stream(0).wait_stream(side);
  for (int replay = 0; replay < 3; ++replay) {
    SCOPED_TRACE(replay);
    std::vector<Tensor> expected = steps(eager);
    graph.replay();
    for (size_t i = 0; i < expected.size(); ++i) EXPECT_EQ(values(static_outputs[i]), values(expected[i]));
    EXPECT_EQ(offset_of(captured[1]), offset_of(eager[1]));
    EXPECT_EQ(offset_of(captured[2]), offset_of(eager[2]));
  }
  EXPECT_NE(values(static_outputs[0]), values(static_outputs[1]));  // two streams of numbers
}

TEST(GraphGenerators, GraphSafeStatesAreSharedAndClonedStatesAreNot) {
  Generator g(Device("cuda:1"));
  g.manual_seed(4);
  Generator shared = g.graphsafe_get_state(), copy = clone_of(g);
  EXPECT_EQ(shared.device(), Device("cuda:1"));
  (void)rand({3}, TensorOptions().device("cuda:1"), shared);
  EXPECT_EQ(offset_of(g), 12u);  // drawn through the shared handle
  EXPECT_EQ(offset_of(copy), 0u);
  EXPECT_EQ(copy.initial_seed(), 4u);
  Generator other(Device("cuda:1"));
  other.graphsafe_set_state(copy);
  (void)rand({3}, TensorOptions().device("cuda:1"), other);
  EXPECT_EQ(offset_of(copy), 12u);
  EXPECT_EQ(offset_of(g), 12u);
  Tensor state = clone_of(g).get_state();
  state[8].fill_(40);  // the offset's low byte
  g.set_state(state);
  EXPECT_EQ(offset_of(shared), 40u);  // set through g, seen through the shared handle
  expect_error<DeviceError>([&] { g.graphsafe_set_state(Generator(Device("cuda:0"))); }, "graphsafe_set_state");
  EXPECT_EQ(offset_of(shared), 40u);  // still sharing
}

TEST(GraphGenerators, RegisteringIsRefusedForCpuGeneratorsAndDuringACapture) {
  cuda::CUDAGraph graph;
  expect_error<DeviceError>([&] { graph.register_generator_state(Generator()); },
                            "Expected a 'cuda' device type for generator but found 'cpu'");
  Generator g(Device("cuda:0"));
  cuda::Stream side(0);
  side.wait_stream(cuda::current_stream(0));
  Tensor x = empty({4}, TensorOptions().device("cuda:0"));
  {
    cuda::StreamGuard guard(side);
    graph.capture_begin();
    expect_error<CudaError>([&] { graph.register_generator_state(g); },
                            "Cannot register the state during capturing stage.");
    expect_error<CudaError>([&] { x.uniform_(0, 1, g); }, "not in capture mode");  // not registered by it
    graph.capture_end();
  }
  cuda::current_stream(0).wait_stream(side);
  graph.replay();
}

TEST(Samplers, ARandomSamplerWithAGeneratorRepeatsFromARestoredState) {
  Generator g;
  g.manual_seed(17);
  data::RandomSampler sampler(50, g);
  std::vector<size_t> first = sampler.indices();
  Tensor state = g.get_state();
  std::vector<size_t> second = sampler.indices();
  EXPECT_NE(first, second);
  std::vector<size_t> sorted = second;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < sorted.size(); ++i) EXPECT_EQ(sorted[i], i);
  g.set_state(state);
  EXPECT_EQ(sampler.indices(), second);
  expect_error<DeviceError>([] { data::RandomSampler(5, Generator(Device("cuda:0"))); },
                            "the generator must be a cpu generator");
}

TEST(Samplers, TheDataLoaderShufflesWithTheGivenGenerator) {
  auto dataset = std::make_shared<data::TensorDataset>(arange(20).reshape({20, 1}).to(kFloat32), arange(20));
  auto order = [&](Generator g) {
    data::DataLoader loader(dataset, data::DataLoaderOptions().batch_size(20).shuffle(true).generator(g));
    return (*loader.begin()).target.to_vector<int64_t>();
  };
  Generator a, b;
  a.manual_seed(30);
  b.manual_seed(30);
  EXPECT_EQ(order(a), order(b));
  Generator c;
  c.manual_seed(31);
  EXPECT_NE(order(a), order(c));  // a has moved on, and c is another seed
}

}  // namespace
