// CUDA graphs and devices on two emulated devices: the graph guard's default capture
// stream is one per device (PyTorch shares one, pytorch#87894), and reset_device refuses
// while a capture is open on the device instead of leaving the backend capturing for good.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>

#include "ember/cuda.h"
#include "ember/ember.h"
#include "ember/errors.h"
#include "test_support.h"

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

// Everything a zombie capture refused: a synchronization, a new guarded capture, pinning.
void expect_device_usable(int device) {
  EXPECT_NO_THROW(cuda::synchronize(device));
  Tensor x = ember::full({4}, 1.0, on(device));
  cuda::CUDAGraph g;
  Tensor y;
  {
    cuda::DeviceGuard guard(device);
    cuda::graph capture(g);
    y = x * 3.0;
  }
  g.replay();
  EXPECT_EQ(values(y), std::vector<float>(4, 3.0f));
  EXPECT_TRUE(ember::ones({4}).pin_memory().is_pinned());
}

// Issue 34 item 13: a second guard under DeviceGuard(1) captured nothing (its side stream,
// made on cuda:0 by the first guard, made cuda:0 current, so the cuda:1 work ran eagerly).
TEST(CudaGraphDevices, TheDefaultCaptureStreamIsOnePerDevice) {
  ASSERT_TRUE(kEmulated);
  Tensor a = ember::full({4}, 1.0, on(0));
  Tensor b = ember::full({4}, 1.0, on(1));
  const Tensor one0 = ember::ones({4}, on(0)), one1 = ember::ones({4}, on(1));
  cuda::CUDAGraph g0, g1;
  Tensor out0, out1;
  {
    cuda::graph capture(g0);
    out0 = a * 2.0;
    a.add_(one0);
  }
  {
    cuda::DeviceGuard device(1);
    cuda::graph capture(g1);
    EXPECT_EQ(cuda::current_device(), 1);
    EXPECT_TRUE(cuda::is_current_stream_capturing());
    out1 = b * 5.0;
    b.add_(one1);  // captured: runs only on replays
  }
  EXPECT_EQ(cuda::current_device(), 0);
  cuda::synchronize(1);
  EXPECT_EQ(values(b), std::vector<float>(4, 1.0f));  // nothing ran eagerly
  g1.replay();
  g1.replay();
  EXPECT_EQ(values(b), std::vector<float>(4, 3.0f));
  EXPECT_EQ(values(out1), std::vector<float>(4, 10.0f));  // the second replay read b == 2
  g0.replay();
  EXPECT_EQ(values(a), std::vector<float>(4, 2.0f));
}

// Issue 34 item 7: reset_device in the middle of a capture left the backend capturing
// (the capture's streams became invalid, so nothing could end it): every later
// synchronize, graph guard or pin_memory failed. The reset is refused instead, and the
// capture goes on and ends normally.
TEST(CudaGraphDevices, ResetDeviceIsRefusedWhileACaptureIsOpenOnIt) {
  Tensor x = ember::full({4}, 1.0, on(0));
  const Tensor one = ember::ones({4}, on(0));
  cuda::CUDAGraph g;
  Tensor y;
  {
    cuda::graph capture(g);
    y = x * 2.0;
    EXPECT_THROW_MSG(cuda::reset_device(0), CudaError,
                     "CUDA error: operation not permitted when stream is capturing (reset_device of cuda:0 while a "
                     "graph capture is open on it: end the capture first)");
    y.add_(one);
  }
  g.replay();
  EXPECT_EQ(values(y), std::vector<float>(4, 3.0f));
  expect_device_usable(0);
  EXPECT_NO_THROW(cuda::reset_device(0));  // the capture is over
  expect_device_usable(0);
}

// The graph destroyed in the middle of its capture after the refused reset: its
// destructor ends the capture, and the process is left with none.
TEST(CudaGraphDevices, AGraphDestroyedAfterARefusedResetLeavesNoCaptureOpen) {
  Tensor x = ember::full({4}, 1.0, on(1));
  {
    cuda::DeviceGuard device(1);
    cuda::Stream side(1);
    cuda::StreamGuard stream(side);
    auto g = std::make_unique<cuda::CUDAGraph>();
    g->capture_begin();
    Tensor y = x + 1.0;
    EXPECT_THROW(cuda::reset_device(1), CudaError);
    g.reset();
  }
  expect_device_usable(1);
  EXPECT_NO_THROW(cuda::reset_device(1));
  expect_device_usable(1);
  expect_device_usable(0);
}

// After a reset, the device's default capture stream is made anew (the old one is invalid).
TEST(CudaGraphDevices, TheDefaultCaptureStreamSurvivesAResetOfItsDevice) {
  expect_device_usable(1);
  cuda::reset_device(1);
  expect_device_usable(1);
}

// A capture_end that throws (here: on another stream than the capture's) leaves no
// capture open: it ends the capture and discards its graph.
TEST(CudaGraphDevices, ACaptureEndThatThrowsLeavesNoCaptureOpen) {
  Tensor x = ember::full({4}, 1.0, on(0));
  cuda::Stream side(0), other(0);
  cuda::CUDAGraph g;
  {
    cuda::StreamGuard guard(side);
    g.capture_begin();
    Tensor y = x * 2.0;
  }
  {
    cuda::StreamGuard guard(other);
    EXPECT_THROW_MSG(g.capture_end(), CudaError, "Capture must end on the same stream it began on.");
  }
  EXPECT_THROW_MSG(g.replay(), CudaError, "Called CUDAGraph::replay without a preceding successful capture.");
  expect_device_usable(0);
  EXPECT_NO_THROW(cuda::reset_device(0));
  // The graph may capture again.
  cuda::Stream fresh(0);
  Tensor z;
  {
    cuda::graph capture(g, {}, fresh);
    z = x + 4.0;
  }
  g.replay();
  EXPECT_EQ(values(z), std::vector<float>(4, 5.0f));
}

}  // namespace
