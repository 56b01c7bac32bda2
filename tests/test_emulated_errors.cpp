// Asynchronous kernel errors: sticky per device, raised at the next synchronizing call.
#include <gtest/gtest.h>

#include <cstdlib>

#include "ember/cuda.h"
#include "ember/errors.h"
#include "emulated_support.h"
#include "kernels/kernel_call.h"
#include "runtime/stream_state.h"
#include "test_support.h"

namespace cuda = ember::cuda;
using namespace std::chrono_literals;
using ember::testing::emulated;
using ember::testing::error_of;

namespace {

const bool kEmulated = [] {
  unsetenv("CUDA_VISIBLE_DEVICES");
  unsetenv("CUDA_LAUNCH_BLOCKING");
  cuda::emulate(4, size_t{1} << 30);
  return true;
}();

void expect_async_message(const std::string& message, const std::string& original) {
  EXPECT_EQ(message.rfind("CUDA error: device-side assert triggered", 0), 0u) << message;
  EXPECT_NE(message.find(original), std::string::npos) << message;
  EXPECT_NE(message.find("CUDA kernel errors might be asynchronously reported at some other API call, so the "
                         "stacktrace below might be incorrect."),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("For debugging consider passing CUDA_LAUNCH_BLOCKING=1"), std::string::npos) << message;
}

TEST(EmulatedErrors, HostFunctionFailureIsStickyAndDeferred) {
  cuda::Stream s(1);
  cuda::StreamGuard g(s);
  cuda::sleep(100ms);
  // The failure happens on the worker later: queuing it does not throw.
  EXPECT_NO_THROW(emulated().launch_host_function(s.state()->native(),
                                                  [] { throw ember::IndexError("index 7 is out of bounds"); }));
  bool skipped_ran = false;
  emulated().launch_host_function(s.state()->native(), [&] { skipped_ran = true; });
  expect_async_message(error_of<ember::CudaError>([&] { s.synchronize(); }), "index 7 is out of bounds");
  EXPECT_FALSE(skipped_ran);  // work after the failure is skipped, as on a faulted GPU
  // Sticky: every synchronizing call on the device reports it, on any stream.
  expect_async_message(error_of<ember::CudaError>([] { cuda::synchronize(1); }), "index 7 is out of bounds");
  expect_async_message(error_of<ember::CudaError>([] { cuda::default_stream(1).synchronize(); }), "index 7");
  expect_async_message(error_of<ember::CudaError>([] {
                         cuda::Event e;
                         e.record(cuda::default_stream(1));
                         e.synchronize();
                       }),
                       "index 7");
  expect_async_message(error_of<ember::CudaError>([] { emulated().check_error(1); }), "index 7");
  // Other devices are unaffected.
  EXPECT_NO_THROW(cuda::synchronize(0));
  cuda::reset_device(1);
  EXPECT_NO_THROW(cuda::synchronize(1));
  cuda::set_device(0);
}

TEST(EmulatedErrors, RawFreeReportsThePendingError) {
  void* p = emulated().raw_alloc(2, 4096);
  ASSERT_NE(p, nullptr);
  emulated().launch_host_function(emulated().default_stream(2), [] { throw ember::ValueError("bad kernel"); });
  expect_async_message(error_of<ember::CudaError>([&] { emulated().raw_free(2, p); }), "bad kernel");
  cuda::reset_device(2);
  emulated().raw_free(2, p);
}

TEST(EmulatedErrors, KernelLaunchFailureFromTheKernel) {
  // index_select with an out-of-range index, run by the cpu executor on the worker.
  std::vector<float> source = {1.f, 2.f, 3.f};
  std::vector<int64_t> index = {0, 5};
  std::vector<float> out(2);
  ember::detail::KernelCall call;
  call.op = ember::detail::OpKind::IndexSelect;
  call.device = 3;
  call.args = ember::detail::kargs::Dim{0};
  call.inputs = {{source.data(), ember::kFloat32, {3}, {1}}, {index.data(), ember::kInt64, {2}, {1}}};
  call.outputs = {{out.data(), ember::kFloat32, {2}, {1}}};
  EXPECT_NO_THROW(emulated().launch(emulated().default_stream(3), call));
  std::string message = error_of<ember::CudaError>([] { cuda::synchronize(3); });
  EXPECT_EQ(message.rfind("CUDA error: device-side assert triggered", 0), 0u) << message;
  EXPECT_NE(message.find("CUDA_LAUNCH_BLOCKING=1"), std::string::npos) << message;
  cuda::reset_device(3);
}

}  // namespace
