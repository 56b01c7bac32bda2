// Device indices: -1 is "the current device" wherever a device is optional (set_device(-1)
// does nothing, as torch.cuda.set_device(-1)); anything below -1 is an IndexError instead
// of silently meaning the current device.
#include "test_support.h"

namespace cuda = ember::cuda;

namespace {

TEST(DeviceIndices, BelowMinusOneIsAnIndexError) {
  EMBER_REQUIRE_DEVICES(2);
  cuda::set_device(1);
  for (int bad : {-2, -7, -1000}) {
    EXPECT_THROW_MSG(cuda::reset_device(bad), ember::IndexError, "Device index value " + std::to_string(bad));
    EXPECT_THROW_MSG(cuda::synchronize(bad), ember::IndexError, "is out of index range");
    EXPECT_THROW(cuda::set_device(bad), ember::IndexError);
    EXPECT_THROW(cuda::DeviceGuard guard(bad), ember::IndexError);
    EXPECT_THROW(cuda::Stream s(bad), ember::IndexError);
    EXPECT_THROW(cuda::current_stream(bad), ember::IndexError);
    EXPECT_THROW(cuda::default_stream(bad), ember::IndexError);
    EXPECT_THROW(cuda::get_device_properties(bad), ember::IndexError);
    EXPECT_THROW(cuda::memory_allocated(bad), ember::IndexError);
    EXPECT_THROW(cuda::mem_get_info(bad), ember::IndexError);
    EXPECT_EQ(cuda::current_device(), 1);  // untouched
  }
  cuda::set_device(0);
}

TEST(DeviceIndices, MinusOneIsTheCurrentDevice) {
  EMBER_REQUIRE_DEVICES(2);
  cuda::set_device(1);
  cuda::set_device(-1);  // a no-op
  EXPECT_EQ(cuda::current_device(), 1);
  cuda::set_device(ember::Device("cuda"));
  EXPECT_EQ(cuda::current_device(), 1);
  {
    cuda::DeviceGuard guard(-1);
    EXPECT_EQ(cuda::current_device(), 1);
  }
  cuda::synchronize(-1);
  EXPECT_EQ(cuda::Stream(-1, 0).device_index(), 1);
  EXPECT_EQ(cuda::current_stream(-1), cuda::default_stream(1));
  EXPECT_EQ(cuda::get_device_properties(-1).name, cuda::get_device_properties(1).name);
  EXPECT_EQ(cuda::memory_allocated(-1), cuda::memory_allocated(1));
  cuda::set_device(0);
}

}  // namespace
