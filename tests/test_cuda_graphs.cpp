// CUDA graphs on emulated devices: capture, replay, fork/join capture, the capture errors
// (messages as CUDA's cudaGetErrorString and PyTorch's CUDAGraph.cpp word them).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <functional>
#include <thread>

#include "ember/cuda.h"
#include "ember/ember.h"
#include "ember/errors.h"

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

const char* kNotPermitted = "operation not permitted when stream is capturing";

ember::TensorOptions on(int device) { return ember::TensorOptions().device(ember::Device(ember::kCUDA, device)); }

std::vector<float> values(const Tensor& t) { return t.cpu().to_vector<float>(); }

// Runs `call`, expecting CudaError with `message` in it.
void expect_cuda_error(const std::function<void()>& call, const std::string& message) {
  try {
    call();
    ADD_FAILURE() << "no CudaError; expected: " << message;
  } catch (const CudaError& e) {
    EXPECT_THAT(e.what(), HasSubstr(message));
  }
}

TEST(CudaGraph, CapturedWorkRunsOnlyOnReplay) {
  ASSERT_TRUE(kEmulated);
  Tensor x = ember::full({4}, 1.0, on(0));
  cuda::Stream side(0);
  side.wait_stream(cuda::current_stream(0));
  cuda::CUDAGraph g;
  Tensor y;
  {
    cuda::StreamGuard guard(side);
    g.capture_begin();
    EXPECT_TRUE(cuda::is_current_stream_capturing());
    y = x * 2.0 + 1.0;
    x += 1.0;
    g.capture_end();
    EXPECT_FALSE(cuda::is_current_stream_capturing());
  }
  EXPECT_EQ(values(x), std::vector<float>(4, 1.0f));  // recorded, not run
  g.replay();
  EXPECT_EQ(values(y), std::vector<float>(4, 3.0f));
  EXPECT_EQ(values(x), std::vector<float>(4, 2.0f));
  g.replay();
  EXPECT_EQ(values(y), std::vector<float>(4, 5.0f));
  EXPECT_EQ(values(x), std::vector<float>(4, 3.0f));
  // New inputs are a copy_ into the static input.
  x.copy_(ember::full({4}, 10.0, on(0)));
  g.replay();
  EXPECT_EQ(values(y), std::vector<float>(4, 21.0f));
}

TEST(CudaGraph, ReplayIsOrderedOnTheCurrentStreamIncludingTheDefaultStream) {
  Tensor x = ember::zeros({1000}, on(0));
  cuda::CUDAGraph g;
  Tensor y;
  {
    cuda::graph capture(g);
    y = x + 1.0;
  }
  // The default stream: a long sleep, then a fill, then the replay; the replay sees the fill.
  cuda::sleep(std::chrono::milliseconds(20));
  x.fill_(41.0);
  g.replay();
  EXPECT_EQ(values(y), std::vector<float>(1000, 42.0f));
  // Another stream: ordered after its own earlier work only, so wait for the fill first.
  cuda::Stream other(0);
  x.fill_(1.0);
  other.wait_stream(cuda::current_stream(0));
  {
    cuda::StreamGuard guard(other);
    g.replay();
  }
  cuda::current_stream(0).wait_stream(other);
  EXPECT_EQ(values(y), std::vector<float>(1000, 2.0f));
}

TEST(CudaGraph, ForkJoinCaptureAcrossTwoStreams) {
  Tensor x = ember::full({8}, 2.0, on(0));
  cuda::Stream s1(0), s2(0);
  s1.wait_stream(cuda::current_stream(0));
  cuda::CUDAGraph g;
  Tensor a, b, c;
  {
    cuda::StreamGuard guard(s1);
    g.capture_begin();
    a = x * 3.0;
    s2.wait_stream(s1);  // fork: s2 joins the capture
    {
      cuda::StreamGuard on_s2(s2);
      EXPECT_TRUE(cuda::is_current_stream_capturing());
      b = a + 1.0;
    }
    c = x - 1.0;
    s1.wait_stream(s2);  // join
    g.capture_end();
  }
  {
    cuda::StreamGuard on_s2(s2);
    EXPECT_FALSE(cuda::is_current_stream_capturing());
  }
  g.replay();
  EXPECT_EQ(values(a), std::vector<float>(8, 6.0f));
  EXPECT_EQ(values(b), std::vector<float>(8, 7.0f));
  EXPECT_EQ(values(c), std::vector<float>(8, 1.0f));
}

TEST(CudaGraph, UnjoinedForkFailsCaptureEndAndEndsTheCapture) {
  Tensor x = ember::full({8}, 2.0, on(0));
  cuda::Stream s1(0), s2(0);
  s1.wait_stream(cuda::current_stream(0));
  cuda::CUDAGraph g;
  {
    cuda::StreamGuard guard(s1);
    g.capture_begin();
    Tensor a = x * 3.0;
    s2.wait_stream(s1);
    {
      cuda::StreamGuard on_s2(s2);
      Tensor b = a + 1.0;
    }
    expect_cuda_error([&] { g.capture_end(); }, "capturing stream has unjoined work");
    EXPECT_FALSE(cuda::is_current_stream_capturing());
  }
  {
    cuda::StreamGuard on_s2(s2);
    EXPECT_FALSE(cuda::is_current_stream_capturing());
  }
  expect_cuda_error([&] { g.replay(); }, "Called CUDAGraph::replay without a preceding successful capture.");
  // The graph and both streams are usable again.
  Tensor y;
  {
    cuda::graph capture(g, {}, s1);
    y = x + 5.0;
  }
  g.replay();
  EXPECT_EQ(values(y), std::vector<float>(8, 7.0f));
}

// Each synchronising call on a capturing stream fails and invalidates the capture.
TEST(CudaGraph, SynchronizingCallsDuringCaptureAreRefused) {
  Tensor x = ember::full({4}, 1.0, on(0));
  cuda::Stream side(0);
  side.wait_stream(cuda::current_stream(0));  // x is written on the default stream
  std::vector<std::pair<std::string, std::function<void(Tensor&)>>> calls = {
      {"device synchronize", [](Tensor&) { cuda::synchronize(); }},
      {"stream synchronize", [&](Tensor&) { side.synchronize(); }},
      {"stream query", [&](Tensor&) { (void)side.query(); }},
      {"item", [](Tensor& y) { (void)y.sum().item<float>(); }},
      {"cpu", [](Tensor& y) { (void)y.cpu(); }},
      {"copy from pageable memory", [](Tensor& y) { y.copy_(ember::ones({4})); }},
      {"event query",
       [&](Tensor&) {
         cuda::Event e;
         e.record(side);
         (void)e.query();
       }},
      {"event synchronize",
       [&](Tensor&) {
         cuda::Event e;
         e.record(side);
         e.synchronize();
       }},
  };
  for (auto& [name, call] : calls) {
    SCOPED_TRACE(name);
    cuda::CUDAGraph g;
    cuda::StreamGuard guard(side);
    g.capture_begin();
    Tensor y = x + 1.0;
    expect_cuda_error([&] { call(y); }, kNotPermitted);
    expect_cuda_error([&] { g.capture_end(); }, "operation failed due to a previous error during capture");
    EXPECT_FALSE(cuda::is_current_stream_capturing());
    // State intact: the stream runs work, the same graph captures again.
    Tensor z;
    g.capture_begin();
    z = x * 4.0;
    g.capture_end();
    g.replay();
    EXPECT_EQ(values(z), std::vector<float>(4, 4.0f));
  }
}

TEST(CudaGraph, CapturesAreIsolatedFromOutsideWorkAndFromEachOther) {
  Tensor x = ember::ones({4}, on(0));
  cuda::Stream s1(0), s2(0);
  s1.wait_stream(cuda::current_stream(0));
  s2.wait_stream(cuda::current_stream(0));
  // Waiting on work recorded outside the capture would cross its boundary.
  {
    cuda::CUDAGraph g;
    cuda::Event outside;
    outside.record(s2);
    cuda::StreamGuard guard(s1);
    g.capture_begin();
    expect_cuda_error([&] { s1.wait_event(outside); }, "dependency created on uncaptured work in another stream");
    expect_cuda_error([&] { g.capture_end(); }, "operation failed due to a previous error during capture");
  }
  // Two open captures (relaxed, so both may be open at once) cannot be joined.
  {
    cuda::CUDAGraph g1, g2;
    {
      cuda::StreamGuard guard(s1);
      g1.capture_begin({}, "relaxed");
    }
    {
      cuda::StreamGuard guard(s2);
      g2.capture_begin({}, "relaxed");
    }
    expect_cuda_error([&] { s2.wait_stream(s1); }, "operation would result in a merge of separate capture sequences");
    {
      cuda::StreamGuard guard(s1);
      expect_cuda_error([&] { g1.capture_end(); }, "operation failed due to a previous error during capture");
    }
    {
      cuda::StreamGuard guard(s2);
      expect_cuda_error([&] { g2.capture_end(); }, "operation failed due to a previous error during capture");
    }
  }
  // Both streams work normally again.
  Tensor y;
  {
    cuda::StreamGuard guard(s1);
    y = x * 2.0;
  }
  cuda::current_stream(0).wait_stream(s1);
  EXPECT_EQ(values(y), std::vector<float>(4, 2.0f));
}

TEST(CudaGraph, CaptureErrorModesDecideWhichThreadsAreRefused) {
  Tensor x = ember::full({4}, 1.0, on(0));
  Tensor other_data = ember::full({4}, 3.0, on(1));
  cuda::Stream side(0);
  side.wait_stream(cuda::current_stream(0));
  // Another thread copying to pageable memory (a potentially unsafe call) while a capture is open.
  auto other_thread_copies = [&] {
    bool refused = false;
    std::thread t([&] {
      try {
        (void)other_data.cpu();
      } catch (const CudaError& e) {
        refused = std::string(e.what()).find(kNotPermitted) != std::string::npos;
      }
    });
    t.join();
    return refused;
  };
  for (const char* mode : {"global", "thread_local", "relaxed"}) {
    SCOPED_TRACE(mode);
    cuda::CUDAGraph g;
    cuda::StreamGuard guard(side);
    g.capture_begin({}, mode);
    Tensor y = x + 1.0;
    const bool global = std::string(mode) == "global";
    EXPECT_EQ(other_thread_copies(), global);
    // The capturing thread's own unsafe call elsewhere: refused unless relaxed.
    bool own_refused = false;
    try {
      (void)other_data.cpu();
    } catch (const CudaError& e) {
      own_refused = std::string(e.what()).find(kNotPermitted) != std::string::npos;
    }
    EXPECT_EQ(own_refused, std::string(mode) != "relaxed");
    if (global || own_refused) {
      expect_cuda_error([&] { g.capture_end(); }, "operation failed due to a previous error during capture");
    } else {
      g.capture_end();
      g.replay();
      EXPECT_EQ(values(y), std::vector<float>(4, 2.0f));
    }
  }
  EXPECT_THROW(
      {
        cuda::CUDAGraph g;
        cuda::StreamGuard guard(side);
        g.capture_begin({}, "strict");
      },
      ember::ValueError);
}

TEST(CudaGraph, BadUseIsRefusedWithPyTorchsMessages) {
  cuda::CUDAGraph g;
  expect_cuda_error([&] { g.capture_begin(); },
                    "CUDA graphs must be captured on a non-default stream. (However, after capture, it's ok to "
                    "replay them on the default stream.)");
  expect_cuda_error([&] { g.replay(); }, "Called CUDAGraph::replay without a preceding successful capture.");
  expect_cuda_error([&] { g.capture_end(); }, "Capture must end on the same stream it began on.");
  expect_cuda_error([&] { (void)g.pool(); }, "Called CUDAGraph::pool() without a preceding successful capture.");
  cuda::Stream side(0);
  Tensor x = ember::ones({4}, on(0));
  side.wait_stream(cuda::current_stream(0));
  {
    cuda::StreamGuard guard(side);
    g.capture_begin();
    cuda::CUDAGraph second;
    expect_cuda_error([&] { second.capture_begin(); }, kNotPermitted);
    Tensor y = x + 1.0;
    g.capture_end();
    expect_cuda_error([&] { g.capture_begin(); }, "This CUDAGraph instance already owns a captured graph.");
  }
  g.replay();
  g.reset();
  expect_cuda_error([&] { g.replay(); }, "Called CUDAGraph::replay without a preceding successful capture.");
  expect_cuda_error([&] { (void)g.pool(); }, "Called CUDAGraph::pool() without a preceding successful capture.");
}

TEST(CudaGraph, GuardEndsTheCaptureAndRestoresTheStream) {
  cuda::Stream before = cuda::current_stream(0);
  cuda::CUDAGraph g;
  Tensor x = ember::ones({4}, on(0));
  Tensor y;
  {
    cuda::graph capture(g);
    EXPECT_FALSE(cuda::current_stream(0) == before);  // a side stream
    EXPECT_TRUE(cuda::is_current_stream_capturing());
    y = x * 7.0;
  }
  EXPECT_TRUE(cuda::current_stream(0) == before);
  EXPECT_FALSE(cuda::is_current_stream_capturing());
  g.replay();
  EXPECT_EQ(values(y), std::vector<float>(4, 7.0f));
  // An exception inside the scope: the capture ends, the first exception wins.
  cuda::CUDAGraph h;
  EXPECT_THROW(
      {
        cuda::graph capture(h);
        (void)x.sum().item<float>();
      },
      CudaError);
  EXPECT_TRUE(cuda::current_stream(0) == before);
  EXPECT_FALSE(cuda::is_current_stream_capturing());
  expect_cuda_error([&] { h.replay(); }, "Called CUDAGraph::replay without a preceding successful capture.");
  // A capture that cannot end cleanly: the guard's end throws.
  cuda::CUDAGraph k;
  cuda::Stream fork(0);
  EXPECT_THROW(
      {
        cuda::graph capture(k);
        fork.wait_stream(cuda::current_stream(0));
        cuda::StreamGuard on_fork(fork);
        Tensor z = x + 1.0;
      },
      CudaError);
  EXPECT_TRUE(cuda::current_stream(0) == before);
}

TEST(CudaGraph, TheStreamSanitizerChecksEachReplayAsTheCapturedAccesses) {
  // Captured work runs at replays: the capture itself is no access on the capture stream,
  // and each replay is checked as the accesses its capture recorded, on the replay stream.
  Tensor x = ember::ones({4}, on(0));
  cuda::sanitizer::enable(cuda::sanitizer::Mode::Error);
  cuda::CUDAGraph g;
  Tensor y;
  {
    cuda::graph capture(g);
    y = x * 3.0;
  }
  g.replay();
  std::vector<float> result;
  EXPECT_NO_THROW(result = values(y));  // ordered: the same stream
  EXPECT_EQ(result, std::vector<float>(4, 3.0f));
  // A replay on another stream, read on the default stream without waiting for it.
  cuda::Stream other(0);
  other.wait_stream(cuda::current_stream(0));
  {
    cuda::StreamGuard guard(other);
    g.replay();
  }
  try {
    (void)values(y);
    ADD_FAILURE() << "the unordered read of the replay's output was not reported";
  } catch (const ember::DataRaceError& e) {
    EXPECT_THAT(e.what(), HasSubstr("CUDA graph replay"));
  }
  // And a write to its input on the default stream while the replay may still read it.
  cuda::synchronize();
  {
    cuda::StreamGuard guard(other);
    g.replay();
  }
  EXPECT_THROW(x.fill_(2.0), ember::DataRaceError);
  cuda::synchronize();
  cuda::current_stream(0).wait_stream(other);
  {
    cuda::StreamGuard guard(other);
    g.replay();
  }
  cuda::current_stream(0).wait_stream(other);
  EXPECT_NO_THROW(x.fill_(2.0));
  cuda::sanitizer::disable();
}

TEST(CudaGraph, RandomOpsDrawNewNumbersOnEachReplayAsEagerWould) {
  Tensor x = ember::empty({64}, on(0));
  ember::manual_seed(1234);
  cuda::CUDAGraph g;
  {
    cuda::graph capture(g);
    x.uniform_(0.0, 1.0);
  }
  g.replay();
  std::vector<float> first = values(x);
  g.replay();
  std::vector<float> second = values(x);
  EXPECT_NE(first, second);
  std::vector<float> after = values(ember::rand({64}, on(0)));
  // Eagerly, from the same seed: the capture drew nothing, each replay drew the next numbers.
  ember::manual_seed(1234);
  EXPECT_EQ(values(ember::rand({64}, on(0))), first);
  EXPECT_EQ(values(ember::rand({64}, on(0))), second);
  EXPECT_EQ(values(ember::rand({64}, on(0))), after);
}

TEST(CudaGraph, CapturedDropoutDrawsANewMaskOnEachReplayAsEagerWould) {
  Tensor x = ember::ones({256}, on(0));
  ember::manual_seed(99);
  cuda::CUDAGraph g;
  Tensor y;
  {
    cuda::graph capture(g);
    y = ember::nn::functional::dropout(x, 0.5, /*training=*/true);
  }
  std::vector<std::vector<float>> masks;
  for (int i = 0; i < 3; ++i) {
    g.replay();
    masks.push_back(values(y));
  }
  EXPECT_NE(masks[0], masks[1]);
  EXPECT_NE(masks[1], masks[2]);
  EXPECT_NE(masks[0], masks[2]);
  std::vector<float> after = values(ember::nn::functional::dropout(x, 0.5, true));
  // Eagerly from the same seed: the same masks in the same order, then the same next draw.
  ember::manual_seed(99);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(values(ember::nn::functional::dropout(x, 0.5, true)), masks[i]) << i;
  EXPECT_EQ(values(ember::nn::functional::dropout(x, 0.5, true)), after);
}

}  // namespace
