// Device selection: counts, emulate(), set_device and its errors, DeviceGuard, properties.
// Runs on the driver backend or emulated devices; emulated-only checks skip elsewhere.
#include <string>
#include <thread>

#include "runtime/context.h"
#include "test_support.h"

namespace cuda = ember::cuda;
using ember::testing::error_of;

namespace {

// "[0, n)" as the index errors print the device range.
std::string index_range() { return "[0, " + std::to_string(cuda::device_count()) + ")"; }

TEST(RuntimeDevices, CountAndBackend) {
  EMBER_REQUIRE_DEVICES(1);
  EXPECT_TRUE(cuda::is_available());
  EXPECT_GE(cuda::device_count(), 1);
  std::string backend = cuda::backend_name();
  EXPECT_TRUE(backend == "driver" || backend == "emulated") << backend;
}

TEST(RuntimeDevices, EmulatedCountAndBackend) {
  EMBER_REQUIRE_EMULATED();
  EXPECT_TRUE(cuda::is_available());
  EXPECT_EQ(cuda::device_count(), 4);
  EXPECT_EQ(cuda::backend_name(), "emulated");
}

TEST(RuntimeDevices, EmulateArgumentsAreChecked) {
  EMBER_REQUIRE_EMULATED();
  EXPECT_EQ(error_of<ember::ValueError>([] { cuda::emulate(0); }),
            "emulate: the number of emulated devices must be between 1 and 64, but got 0");
  EXPECT_THROW(cuda::emulate(-2), ember::ValueError);
  EXPECT_THROW(cuda::emulate(2, 0), ember::ValueError);
}

TEST(RuntimeDevices, EmulateAfterFirstUse) {
  EMBER_REQUIRE_EMULATED();
  cuda::device_count();
  cuda::emulate(4, size_t{1} << 30);  // the configuration already running: allowed
  std::string message = error_of<ember::CudaError>([] { cuda::emulate(2); });
  EXPECT_NE(message.find("must be called before the first cuda call"), std::string::npos) << message;
  EXPECT_NE(message.find("'emulated' with 4 device(s)"), std::string::npos) << message;
  EXPECT_EQ(cuda::device_count(), 4);
}

TEST(RuntimeDevices, SetDeviceIsPerThread) {
  EMBER_REQUIRE_DEVICES(3);
  EXPECT_EQ(cuda::current_device(), 0);
  cuda::set_device(2);
  EXPECT_EQ(cuda::current_device(), 2);
  int other = -1;
  std::thread([&] { other = cuda::current_device(); }).join();
  EXPECT_EQ(other, 0);  // every thread starts on device 0
  cuda::set_device(0);
}

TEST(RuntimeDevices, SetDeviceErrors) {
  EMBER_REQUIRE_DEVICES(4);
  int past = cuda::device_count() + 3;
  EXPECT_EQ(error_of<ember::IndexError>([&] { cuda::set_device(past); }),
            "Device index value " + std::to_string(past) + " is out of index range " + index_range());
  EXPECT_EQ(error_of<ember::IndexError>([] { cuda::set_device(-2); }),
            "Device index value -2 is out of index range " + index_range());
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
  EMBER_REQUIRE_DEVICES(4);
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
  EXPECT_THROW(cuda::DeviceGuard bad(cuda::device_count()), ember::IndexError);
  EXPECT_THROW(cuda::DeviceGuard bad(ember::Device(ember::kCPU)), ember::ValueError);
  EXPECT_EQ(cuda::current_device(), 1);
  cuda::set_device(0);
}

TEST(RuntimeDevices, Properties) {
  EMBER_REQUIRE_DEVICES(1);
  int last = cuda::device_count() - 1;
  cuda::DeviceProperties p = cuda::get_device_properties(last);
  EXPECT_GT(p.total_memory, 0u);
  EXPECT_FALSE(p.name.empty());
  EXPECT_EQ(cuda::get_device_name(last), p.name);
  EXPECT_GE(p.major, 1);
  EXPECT_GE(p.multi_processor_count, 1);
  EXPECT_EQ(cuda::get_device_name(), cuda::get_device_properties(0).name);  // the current device
  EXPECT_THROW(cuda::get_device_properties(cuda::device_count()), ember::IndexError);
}

TEST(RuntimeDevices, EmulatedProperties) {
  EMBER_REQUIRE_EMULATED();
  cuda::DeviceProperties p = cuda::get_device_properties(1);
  EXPECT_EQ(p.total_memory, size_t{1} << 30);
  EXPECT_EQ(p.name, "ember emulated GPU 1");
  EXPECT_GE(p.major, 8);
  EXPECT_GE(p.multi_processor_count, 1);
  EXPECT_EQ(cuda::get_device_name(), "ember emulated GPU 0");
  EXPECT_THROW(cuda::get_device_properties(4), ember::IndexError);
}

TEST(RuntimeDevices, PeerAccess) {
  EMBER_REQUIRE_DEVICES(1);
  EXPECT_FALSE(cuda::can_device_access_peer(0, 0));  // a device is not its own peer
  EXPECT_THROW(cuda::can_device_access_peer(0, cuda::device_count()), ember::IndexError);
}

TEST(RuntimeDevices, EmulatedPeerAccess) {
  EMBER_REQUIRE_EMULATED();  // real GPUs may lack peer access between some pairs
  EXPECT_TRUE(cuda::can_device_access_peer(0, 1));
  EXPECT_TRUE(cuda::can_device_access_peer(3, 2));
  EXPECT_FALSE(cuda::can_device_access_peer(1, 1));
  EXPECT_THROW(cuda::can_device_access_peer(0, 4), ember::IndexError);
}

TEST(RuntimeDevices, ResolveDevice) {
  EMBER_REQUIRE_DEVICES(3);
  cuda::DeviceGuard g(2);
  EXPECT_EQ(ember::detail::resolve_device(ember::Device(ember::kCUDA)).index(), 2);
  EXPECT_EQ(ember::detail::resolve_device(ember::Device(ember::kCUDA, 1)).index(), 1);
  int past = cuda::device_count();
  EXPECT_THROW(ember::detail::resolve_device(ember::Device(ember::kCUDA, past)), ember::IndexError);
  EXPECT_EQ(ember::detail::resolve_device(ember::Device(ember::kCPU)),
            ember::Device(ember::kCPU));  // cpu passes through
}

TEST(RuntimeDevices, SynchronizeArguments) {
  EMBER_REQUIRE_DEVICES(4);
  cuda::synchronize();
  cuda::synchronize(3);
  cuda::synchronize(ember::Device(ember::kCUDA, 1));
  EXPECT_THROW(cuda::synchronize(cuda::device_count()), ember::IndexError);
  EXPECT_THROW(cuda::synchronize(ember::Device(ember::kCPU)), ember::ValueError);
}

}  // namespace
