// CUDA graphs on emulated devices: what a graph's replays use stays valid while they are
// queued, and failures in the middle of a capture leave the graph, the stream and the
// allocator usable.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <future>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>

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

// An op that throws in the middle of a guarded capture: the guard ends the capture while
// unwinding (no std::terminate), the exception that was thrown is the one caught, and the
// stream, the graph and the allocator are left usable.
TEST(CudaGraphLifetime, AnExceptionInTheMiddleOfAGuardedCaptureEndsItCleanly) {
  Tensor x = ember::full({4}, 1.0, on(0));
  cuda::Stream side(0);
  const cuda::Stream before = cuda::current_stream(0);
  cuda::CUDAGraph g;
  Tensor y;
  // An argument error before anything is queued: the capture ends with what it recorded.
  EXPECT_THROW(
      {
        cuda::graph capture(g, {}, side);
        y = x * 2.0;
        Tensor bad = x + ember::ones({3}, on(0));
      },
      ember::ValueError);
  EXPECT_EQ(cuda::current_stream(0), before);
  {
    cuda::StreamGuard guard(side);
    EXPECT_FALSE(cuda::is_current_stream_capturing());
  }
  g.replay();
  EXPECT_EQ(values(y), std::vector<float>(4, 2.0f));
  g.reset();
  // A refused call invalidates the capture: the guard's end fails too, and the first
  // exception wins; the graph holds nothing and captures again.
  try {
    cuda::graph capture(g, {}, side);
    y = x * 3.0;
    (void)y.sum().item<float>();
    ADD_FAILURE() << "item() was not refused during the capture";
  } catch (const CudaError& e) {
    EXPECT_THAT(e.what(), HasSubstr("operation not permitted when stream is capturing"));
  }
  EXPECT_EQ(cuda::current_stream(0), before);
  EXPECT_THROW(g.replay(), CudaError);
  {
    cuda::graph capture(g, {}, side);
    y = x * 4.0;
  }
  g.replay();
  EXPECT_EQ(values(y), std::vector<float>(4, 4.0f));
}

// A CUDAGraph destroyed by unwinding in the middle of its capture ends the capture: the
// stream captures no more and allocations on it come from the device's pool again.
TEST(CudaGraphLifetime, AGraphDestroyedInTheMiddleOfItsCaptureEndsIt) {
  Tensor x = ember::full({4}, 1.0, on(0));
  cuda::Stream side(0);
  side.wait_stream(cuda::current_stream(0));
  cuda::StreamGuard guard(side);
  try {
    cuda::CUDAGraph g;
    g.capture_begin();
    Tensor y = x * 2.0;
    throw std::runtime_error("interrupted");
  } catch (const std::runtime_error&) {
  }
  EXPECT_FALSE(cuda::is_current_stream_capturing());
  Tensor z = x * 5.0;  // runs now, eagerly
  EXPECT_EQ(values(z), std::vector<float>(4, 5.0f));
  cuda::CUDAGraph again;
  again.capture_begin();
  Tensor w = x + 1.0;
  again.capture_end();
  again.replay();
  EXPECT_EQ(values(w), std::vector<float>(4, 2.0f));
}

// Under the stream sanitizer: a graph with a random op, captured on one stream and
// replayed on another that is ordered after nothing of the capture stream. Nothing of
// the capture ran on the capture stream, so the replay races with nothing there.
TEST(CudaGraphLifetime, ReplayingOnAnotherStreamThanTheCaptureRacesWithNothingOfTheCapture) {
  Tensor x = ember::empty({16}, on(0));
  cuda::Stream capture_stream(0), replay_stream(0);
  cuda::sanitizer::enable(cuda::sanitizer::Mode::Error);
  cuda::CUDAGraph g;
  {
    cuda::graph capture(g, {}, capture_stream);
    x.uniform_(0.0, 1.0);
  }
  replay_stream.wait_stream(cuda::current_stream(0));  // where x was made
  {
    cuda::StreamGuard guard(replay_stream);
    EXPECT_NO_THROW(g.replay());
  }
  cuda::current_stream(0).wait_stream(replay_stream);
  std::vector<float> result;
  EXPECT_NO_THROW(result = values(x));
  cuda::sanitizer::disable();
  EXPECT_EQ(result.size(), 16u);
}

// capture_end from a thread that did not begin a (non-relaxed) capture fails as CUDA's
// cudaStreamEndCapture does, without ending it: the graph is still capturing, and its own
// thread ends the capture afterwards.
TEST(CudaGraphLifetime, CaptureEndFromAnotherThreadFailsAndLeavesTheCaptureOpen) {
  Tensor x = ember::full({4}, 1.0, on(0));
  cuda::Stream side(0);
  side.wait_stream(cuda::current_stream(0));
  cuda::StreamGuard guard(side);
  cuda::CUDAGraph g;
  g.capture_begin({}, "thread_local");
  Tensor y = x * 2.0;
  std::string error;
  std::thread other([&] {
    cuda::StreamGuard same(side);
    try {
      g.capture_end();
    } catch (const CudaError& e) {
      error = e.what();
    }
  });
  other.join();
  EXPECT_THAT(error, HasSubstr("attempt to terminate a thread-local capture sequence from another thread"));
  EXPECT_TRUE(cuda::is_current_stream_capturing());
  Tensor z = y + 1.0;  // still captured
  g.capture_end();
  EXPECT_FALSE(cuda::is_current_stream_capturing());
  g.replay();
  EXPECT_EQ(values(z), std::vector<float>(4, 3.0f));
}

// Two threads replay two graphs with random ops concurrently, each on its own stream:
// every replay reserves its numbers from the one default generator, so afterwards the
// generator stands where the same number of eager draws leaves it; the sanitizer sees
// no race between the two streams.
TEST(CudaGraphLifetime, TwoThreadsReplayTwoGraphsConcurrently) {
  constexpr int kReplays = 20;
  Tensor a = ember::empty({32}, on(0)), b = ember::empty({32}, on(0));
  cuda::Stream sa(0), sb(0);
  cuda::CUDAGraph ga, gb;
  {
    cuda::graph capture(ga, {}, sa);
    a.uniform_(0.0, 1.0);
  }
  {
    cuda::graph capture(gb, {}, sb);
    b.uniform_(0.0, 1.0);
  }
  cuda::sanitizer::enable(cuda::sanitizer::Mode::Error);
  ember::manual_seed(5);
  sa.wait_stream(cuda::current_stream(0));
  sb.wait_stream(cuda::current_stream(0));
  auto replays = [](cuda::CUDAGraph& g, const cuda::Stream& s, std::string& error) {
    try {
      cuda::StreamGuard guard(s);
      for (int i = 0; i < kReplays; ++i) g.replay();
    } catch (const std::exception& e) {
      error = e.what();
    }
  };
  std::string error_a, error_b;
  std::thread ta(replays, std::ref(ga), std::cref(sa), std::ref(error_a));
  std::thread tb(replays, std::ref(gb), std::cref(sb), std::ref(error_b));
  ta.join();
  tb.join();
  cuda::current_stream(0).wait_stream(sa);
  cuda::current_stream(0).wait_stream(sb);
  EXPECT_EQ(error_a, "");
  EXPECT_EQ(error_b, "");
  std::vector<float> next;
  EXPECT_NO_THROW(next = values(ember::rand({32}, on(0))));
  cuda::sanitizer::disable();
  ember::manual_seed(5);
  for (int i = 0; i < 2 * kReplays; ++i) (void)ember::rand({32}, on(0));
  EXPECT_EQ(values(ember::rand({32}, on(0))), next);
}

// Two threads capture at once, each on a stream of its own device, in each mode: a
// capture issues no unsafe call, so neither refuses the other, and both replay.
TEST(CudaGraphLifetime, TwoThreadsCaptureOnTwoDevicesAtOnce) {
  for (const char* mode : {"global", "thread_local", "relaxed"}) {
    SCOPED_TRACE(mode);
    std::promise<void> opened[2], ended[2];
    std::shared_future<void> open_f[2] = {opened[0].get_future().share(), opened[1].get_future().share()};
    std::shared_future<void> end_f[2] = {ended[0].get_future().share(), ended[1].get_future().share()};
    std::vector<float> result[2];
    std::string error[2];
    auto capture_on = [&](int device) {
      const int peer = 1 - device;
      try {
        cuda::set_device(device);
        Tensor x = ember::full({4}, 1.0 + device, on(device));
        cuda::Stream side(device);
        side.wait_stream(cuda::current_stream(device));
        cuda::StreamGuard guard(side);
        cuda::CUDAGraph g;
        g.capture_begin({}, mode);
        Tensor y = x * 10.0;
        opened[device].set_value();
        open_f[peer].wait();  // both captures open at once
        Tensor z = y + 1.0;
        g.capture_end();
        ended[device].set_value();
        end_f[peer].wait();  // a copy to pageable memory is unsafe during a global capture
        g.replay();
        result[device] = values(z);
      } catch (const std::exception& e) {
        error[device] = e.what();
        // The peer must not wait for signals this thread will not give.
        for (std::promise<void>* p : {&opened[device], &ended[device]}) {
          try {
            p->set_value();
          } catch (const std::future_error&) {
          }
        }
      }
    };
    std::thread t0(capture_on, 0);
    std::thread t1(capture_on, 1);
    t0.join();
    t1.join();
    EXPECT_EQ(error[0], "");
    EXPECT_EQ(error[1], "");
    EXPECT_EQ(result[0], std::vector<float>(4, 11.0f));
    EXPECT_EQ(result[1], std::vector<float>(4, 21.0f));
  }
}

// A graph replayed on a side stream outlives a reset of its device (which invalidates
// that stream): destroying it afterwards touches nothing of the old streams.
TEST(CudaGraphLifetime, AGraphDestroyedAfterItsDeviceWasResetLeavesTheDeviceUsable) {
  auto g = std::make_unique<cuda::CUDAGraph>();
  {
    Tensor x = ember::empty({8}, on(1));
    cuda::Stream replay_stream(1);
    {
      cuda::graph capture(*g, {}, cuda::Stream(1));
      x.uniform_(0.0, 1.0);
    }
    replay_stream.wait_stream(cuda::current_stream(1));
    cuda::StreamGuard guard(replay_stream);
    g->replay();
  }
  cuda::reset_device(1);
  EXPECT_NO_THROW(g.reset());
  EXPECT_EQ(values(ember::full({3}, 2.0, on(1)) + 1.0), std::vector<float>(3, 3.0f));
}

// A replay issued inside another capture is captured into it as one step. Without
// random ops it reruns on each outer replay; with them it is refused, since its seed and
// offset would be fixed at the outer capture and every outer replay would draw the same
// numbers.
TEST(CudaGraphLifetime, AReplayInsideAnotherCaptureIsCapturedOrRefusedWithRandomOps) {
  Tensor x = ember::full({4}, 1.0, on(0));
  Tensor r = ember::empty({4}, on(0));
  cuda::Stream side(0);
  cuda::CUDAGraph inner, random, outer;
  {
    cuda::graph capture(inner, {}, side);
    x += 1.0;
  }
  {
    cuda::graph capture(random, {}, side);
    r.uniform_(0.0, 1.0);
  }
  {
    cuda::graph capture(outer, {}, side);
    inner.replay();
    inner.replay();
    try {
      random.replay();
      ADD_FAILURE() << "a replay with random ops was captured";
    } catch (const CudaError& e) {
      EXPECT_THAT(e.what(), HasSubstr("random"));
    }
  }
  EXPECT_EQ(values(x), std::vector<float>(4, 1.0f));
  outer.replay();
  outer.replay();
  EXPECT_EQ(values(x), std::vector<float>(4, 5.0f));
}

// A graph reset and captured again on another device: its seed and offset move to that
// device (nothing of it stays on the first), and its replays draw as eager ops there.
TEST(CudaGraphLifetime, AGraphCapturedAgainOnAnotherDeviceKeepsNothingOnTheFirst) {
  cuda::synchronize();
  const size_t baseline = cuda::memory_allocated(0);
  Tensor a = ember::empty({8}, on(0)), b = ember::empty({8}, on(1));
  const size_t with_a = cuda::memory_allocated(0);
  cuda::CUDAGraph g;
  {
    cuda::graph capture(g, {}, cuda::Stream(0));
    a.uniform_(0.0, 1.0);
  }
  g.reset();
  ember::manual_seed(3);
  {
    cuda::graph capture(g, {}, cuda::Stream(1));
    b.uniform_(0.0, 1.0);
  }
  EXPECT_EQ(cuda::memory_allocated(0), with_a);
  g.replay();
  std::vector<float> drawn = values(b);
  ember::manual_seed(3);
  EXPECT_EQ(values(ember::rand({8}, on(1))), drawn);
  a = Tensor();
  EXPECT_EQ(cuda::memory_allocated(0), baseline);
}

}  // namespace
