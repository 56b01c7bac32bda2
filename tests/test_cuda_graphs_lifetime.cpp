// CUDA graphs on emulated devices: what a graph's replays use stays valid while they are
// queued, and failures in the middle of a capture leave the graph, the stream and the
// allocator usable.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <future>
#include <memory>
#include <stdexcept>

#include "ember/cuda.h"
#include "ember/ember.h"
#include "ember/errors.h"
#include "emulated_support.h"

namespace cuda = ember::cuda;
using ember::CudaError;
using ember::Tensor;
using ::testing::HasSubstr;

namespace {

constexpr size_t MiB = size_t{1} << 20;
const bool kEmulated = [] {
  unsetenv("CUDA_LAUNCH_BLOCKING");
  cuda::emulate(2, 256 * MiB);
  return true;
}();

ember::TensorOptions on(int device) { return ember::TensorOptions().device(ember::Device(ember::kCUDA, device)); }

std::vector<float> values(const Tensor& t) { return t.cpu().to_vector<float>(); }

// A graph with a random op, replayed on another stream behind a closed gate, then
// destroyed: the memory the queued replay writes (the graph's seed and offset, filled on
// the replay stream) must not be handed to new tensors of the capture stream until the
// replay has run.
TEST(CudaGraphLifetime, DestroyingAGraphWhoseReplayIsQueuedKeepsItsMemoryUntilTheReplayRuns) {
  ASSERT_TRUE(kEmulated);
  Tensor x = ember::empty({64}, on(0));
  cuda::Stream capture_stream(0), replay_stream(0);
  ember::manual_seed(7);
  auto g = std::make_unique<cuda::CUDAGraph>();
  {
    cuda::graph capture(*g, {}, capture_stream);
    x.uniform_(0.0, 1.0);
  }
  std::promise<void> gate;
  std::shared_future<void> opened = gate.get_future().share();
  replay_stream.wait_stream(cuda::current_stream(0));
  ember::testing::on_stream(replay_stream, [opened] { opened.wait(); });
  {
    cuda::StreamGuard guard(replay_stream);
    g->replay();
  }
  g.reset();  // destroyed with its replay still queued
  std::vector<Tensor> fresh;
  {
    cuda::StreamGuard guard(capture_stream);
    for (int i = 0; i < 4; ++i) fresh.push_back(ember::full({1}, 777, on(0).dtype(ember::kInt64)));
  }
  gate.set_value();
  cuda::synchronize();
  for (const Tensor& t : fresh) EXPECT_EQ(t.item<int64_t>(), 777);
  // The replay drew what an eager draw from the same seed does.
  std::vector<float> replayed = values(x);
  ember::manual_seed(7);
  EXPECT_EQ(values(ember::rand({64}, on(0))), replayed);
}

}  // namespace
