// Device selection: counts, emulate(), set_device and its errors, DeviceGuard, properties.
#include <gtest/gtest.h>

#include <cstdlib>
#include <thread>

#include "ember/cuda.h"
#include "ember/errors.h"
#include "runtime/context.h"

namespace cuda = ember::cuda;

namespace {

// Backend selection happens once per process: ask for 4 emulated devices before any use.
const bool kEmulated = [] {
  unsetenv("CUDA_VISIBLE_DEVICES");
  unsetenv("CUDA_LAUNCH_BLOCKING");
  cuda::emulate(4, size_t{1} << 30);
  return true;
}();

template <class E, class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  return "<no error>";
}

TEST(RuntimeDevices, CountAndBackend) {
  EXPECT_TRUE(cuda::is_available());
  EXPECT_EQ(cuda::device_count(), 4);
  EXPECT_EQ(cuda::backend_name(), "emulated");
}

TEST(RuntimeDevices, EmulateArgumentsAreChecked) {
  EXPECT_EQ(error_of<ember::ValueError>([] { cuda::emulate(0); }),
            "emulate: the number of emulated devices must be between 1 and 64, but got 0");
  EXPECT_THROW(cuda::emulate(-2), ember::ValueError);
  EXPECT_THROW(cuda::emulate(2, 0), ember::ValueError);
}

TEST(RuntimeDevices, EmulateAfterFirstUse) {
  cuda::device_count();
  cuda::emulate(4, size_t{1} << 30);  // the configuration already running: allowed
  std::string message = error_of<ember::CudaError>([] { cuda::emulate(2); });
  EXPECT_NE(message.find("must be called before the first cuda call"), std::string::npos) << message;
  EXPECT_NE(message.find("'emulated' with 4 device(s)"), std::string::npos) << message;
  EXPECT_EQ(cuda::device_count(), 4);
}

TEST(RuntimeDevices, SetDeviceIsPerThread) {
  EXPECT_EQ(cuda::current_device(), 0);
  cuda::set_device(2);
  EXPECT_EQ(cuda::current_device(), 2);
  int other = -1;
  std::thread([&] { other = cuda::current_device(); }).join();
  EXPECT_EQ(other, 0);  // every thread starts on device 0
  cuda::set_device(0);
}

TEST(RuntimeDevices, SetDeviceErrors) {
  EXPECT_EQ(error_of<ember::IndexError>([] { cuda::set_device(7); }),
            "Device index value 7 is out of index range [0, 4)");
  EXPECT_EQ(error_of<ember::IndexError>([] { cuda::set_device(-1); }),
            "Device index value -1 is out of index range [0, 4)");
  EXPECT_EQ(error_of<ember::ValueError>([] { cuda::set_device(ember::Device(ember::kCPU)); }),
            "Expected a cuda device, but got: cpu");
  EXPECT_EQ(cuda::current_device(), 0);  // state intact after the errors
  cuda::set_device(ember::Device(ember::kCUDA, 3));
  EXPECT_EQ(cuda::current_device(), 3);
  cuda::set_device(ember::Device(ember::kCUDA));  // "cuda": the current device
  EXPECT_EQ(cuda::current_device(), 3);
  cuda::set_device(0);
}

TEST(RuntimeDevices, DeviceGuardNestsAndRestores) {
  cuda::set_device(1);
  {
    cuda::DeviceGuard outer(2);
    EXPECT_EQ(outer.original_device(), 1);
    EXPECT_EQ(cuda::current_device(), 2);
    {
      cuda::DeviceGuard inner(3);
      EXPECT_EQ(cuda::current_device(), 3);
      cuda::set_device(0);  // changed inside: the guard still restores what it found
    }
    EXPECT_EQ(cuda::current_device(), 2);
    {
      cuda::DeviceGuard none(-1);  // torch.cuda.device(-1): no change
      EXPECT_EQ(cuda::current_device(), 2);
    }
  }
  EXPECT_EQ(cuda::current_device(), 1);
  EXPECT_THROW(cuda::DeviceGuard bad(9), ember::IndexError);
  EXPECT_THROW(cuda::DeviceGuard bad(ember::Device(ember::kCPU)), ember::ValueError);
  EXPECT_EQ(cuda::current_device(), 1);
  cuda::set_device(0);
}

TEST(RuntimeDevices, Properties) {
  cuda::DeviceProperties p = cuda::get_device_properties(1);
  EXPECT_EQ(p.total_memory, size_t{1} << 30);
  EXPECT_EQ(p.name, "ember emulated GPU 1");
  EXPECT_GE(p.major, 8);
  EXPECT_GE(p.multi_processor_count, 1);
  EXPECT_EQ(cuda::get_device_name(), "ember emulated GPU 0");
  EXPECT_THROW(cuda::get_device_properties(4), ember::IndexError);
}

TEST(RuntimeDevices, PeerAccess) {
  EXPECT_TRUE(cuda::can_device_access_peer(0, 1));
  EXPECT_TRUE(cuda::can_device_access_peer(3, 2));
  EXPECT_FALSE(cuda::can_device_access_peer(1, 1));
  EXPECT_THROW(cuda::can_device_access_peer(0, 4), ember::IndexError);
}

TEST(RuntimeDevices, ResolveDevice) {
  cuda::DeviceGuard g(2);
  EXPECT_EQ(ember::detail::resolve_device(ember::Device(ember::kCUDA)).index(), 2);
  EXPECT_EQ(ember::detail::resolve_device(ember::Device(ember::kCUDA, 1)).index(), 1);
  EXPECT_THROW(ember::detail::resolve_device(ember::Device(ember::kCUDA, 5)), ember::IndexError);
  EXPECT_EQ(ember::detail::resolve_device(ember::Device(ember::kCPU)), ember::Device(ember::kCPU));  // cpu passes through
}

TEST(RuntimeDevices, SynchronizeArguments) {
  cuda::synchronize();
  cuda::synchronize(3);
  cuda::synchronize(ember::Device(ember::kCUDA, 1));
  EXPECT_THROW(cuda::synchronize(4), ember::IndexError);
  EXPECT_THROW(cuda::synchronize(ember::Device(ember::kCPU)), ember::ValueError);
}

}  // namespace
