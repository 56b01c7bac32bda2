// EMBER_EMULATED_DEVICES / EMBER_EMULATED_MEMORY / CUDA_VISIBLE_DEVICES select the devices.
#include <gtest/gtest.h>

#include <cstdlib>

#include "backends/emulated/emulated_backend.h"
#include "ember/cuda.h"
#include "ember/errors.h"
#include "emulated_support.h"

namespace cuda = ember::cuda;

namespace {

const bool kEnvironment = [] {
  setenv("EMBER_EMULATED_DEVICES", "4", 1);
  setenv("EMBER_EMULATED_MEMORY", "512MiB", 1);
  setenv("CUDA_VISIBLE_DEVICES", "3, 1", 1);  // two of the four, reordered
  unsetenv("CUDA_LAUNCH_BLOCKING");
  return true;
}();

TEST(EmulatedEnvConfig, VisibleDevicesFilterAndReorder) {
  EXPECT_EQ(cuda::backend_name(), "emulated");
  ASSERT_EQ(cuda::device_count(), 2);
  EXPECT_EQ(cuda::get_device_name(0), "ember emulated GPU 3");
  EXPECT_EQ(cuda::get_device_name(1), "ember emulated GPU 1");
  EXPECT_EQ(cuda::get_device_properties(1).total_memory, size_t{512} << 20);
  auto& b = ember::testing::emulated();
  EXPECT_EQ(b.physical_device(0), 3);
  EXPECT_EQ(b.mem_get_info(0).second, size_t{512} << 20);
  EXPECT_THROW(cuda::set_device(2), ember::IndexError);
}

}  // namespace
