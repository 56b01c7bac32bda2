// CUDA_LAUNCH_BLOCKING=1: every enqueue waits, and a kernel error is raised at its call.
#include <gtest/gtest.h>

#include <cstdlib>

#include "ember/cuda.h"
#include "ember/errors.h"
#include "emulated_support.h"
#include "runtime/stream_state.h"

namespace cuda = ember::cuda;
using namespace std::chrono_literals;
using ember::testing::emulated;

namespace {

// Read when the backend is made, so set before the first cuda call of this process.
const bool kBlocking = [] {
  unsetenv("CUDA_VISIBLE_DEVICES");
  setenv("CUDA_LAUNCH_BLOCKING", "1", 1);
  cuda::emulate(2, size_t{1} << 30);
  return true;
}();

TEST(EmulatedLaunchBlocking, EnqueueWaitsForTheWork) {
  EXPECT_TRUE(emulated().launch_blocking());
  cuda::Stream s;
  bool ran = false;
  emulated().launch_host_function(s.state()->native(), [&] { ran = true; });
  EXPECT_TRUE(ran);  // no synchronize needed
  cuda::StreamGuard g(s);
  cuda::sleep(20ms);
  EXPECT_TRUE(s.query());
}

TEST(EmulatedLaunchBlocking, ErrorIsRaisedAtTheCallThatCausedIt) {
  cuda::Stream s(1);
  try {
    emulated().launch_host_function(s.state()->native(), [] { throw ember::IndexError("index 9 out of range"); });
    ADD_FAILURE() << "the failing launch did not throw";
  } catch (const ember::CudaError& e) {
    std::string message = e.what();
    EXPECT_EQ(message.rfind("CUDA error: device-side assert triggered", 0), 0u) << message;
    EXPECT_NE(message.find("index 9 out of range"), std::string::npos) << message;
    // PyTorch drops the hint when CUDA_LAUNCH_BLOCKING is already set.
    EXPECT_EQ(message.find("For debugging consider passing"), std::string::npos) << message;
  }
  cuda::reset_device(1);
  EXPECT_NO_THROW(cuda::default_stream(1).synchronize());
  EXPECT_THROW(s.synchronize(), ember::CudaError);  // made before the reset
}

}  // namespace
