// CUDA_VISIBLE_DEVICES=GPU-<uuid prefix> lists (as nvidia-smi and cluster schedulers
// write them) select emulated devices, and DeviceProperties::uuid names them.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "ember/cuda.h"
#include "runtime/visible_devices.h"

namespace cuda = ember::cuda;
using ember::detail::emulated_device_uuid;

namespace {

TEST(RuntimeVisibleUuid, GpuPrefixesSelectAndReorderEmulatedDevices) {
  const std::string u3 = emulated_device_uuid(3), u1 = emulated_device_uuid(1);
  std::string list = "GPU-" + u3.substr(0, 8) + ",GPU-" + u1;
  setenv("CUDA_VISIBLE_DEVICES", list.c_str(), 1);
  setenv("EMBER_EMULATED_DEVICES", "4", 1);
  setenv("EMBER_EMULATED_MEMORY", "64MiB", 1);
  ASSERT_EQ(cuda::device_count(), 2);
  EXPECT_EQ(cuda::get_device_properties(0).uuid, u3);
  EXPECT_EQ(cuda::get_device_properties(0).name, "ember emulated GPU 3");
  EXPECT_EQ(cuda::get_device_properties(1).uuid, u1);
  EXPECT_EQ(cuda::get_device_properties(1).name, "ember emulated GPU 1");
}

}  // namespace
