// A bad EMBER_EMULATED_DEVICES / EMBER_EMULATED_MEMORY value: is_available() is false and
// warns once, naming the variable and its value (torch.cuda.is_available() never raises);
// calls that need a device raise the clear error; a corrected value is picked up.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "ember/cuda.h"
#include "ember/errors.h"

namespace cuda = ember::cuda;

namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

TEST(RuntimeBadEnv, IsAvailableIsFalseAndWarnsOnce) {
  unsetenv("CUDA_VISIBLE_DEVICES");
  setenv("EMBER_EMULATED_DEVICES", "lots", 1);
  unsetenv("EMBER_EMULATED_MEMORY");
  ::testing::internal::CaptureStderr();
  EXPECT_FALSE(cuda::is_available());
  EXPECT_FALSE(cuda::is_available());
  std::string warning = ::testing::internal::GetCapturedStderr();
  EXPECT_TRUE(contains(warning, "EMBER_EMULATED_DEVICES must be a number of devices between 1 and 64, but got 'lots'"))
      << warning;
  EXPECT_EQ(warning.find("EMBER_EMULATED_DEVICES"), warning.rfind("EMBER_EMULATED_DEVICES")) << "warned twice";
  try {
    cuda::current_device();
    ADD_FAILURE() << "no error";
  } catch (const ember::ValueError& e) {
    EXPECT_TRUE(contains(e.what(), "but got 'lots'")) << e.what();
  }

  setenv("EMBER_EMULATED_DEVICES", "2", 1);
  setenv("EMBER_EMULATED_MEMORY", "many", 1);
  ::testing::internal::CaptureStderr();
  EXPECT_FALSE(cuda::is_available());
  warning = ::testing::internal::GetCapturedStderr();
  EXPECT_TRUE(contains(warning, "EMBER_EMULATED_MEMORY must be a positive size")) << warning;
  EXPECT_TRUE(contains(warning, "but got 'many'")) << warning;
  EXPECT_THROW(cuda::Stream(), ember::ValueError);

  // Nothing was selected, so a corrected environment is read at the next call.
  setenv("EMBER_EMULATED_MEMORY", "64MiB", 1);
  EXPECT_TRUE(cuda::is_available());
  EXPECT_EQ(cuda::device_count(), 2);
  EXPECT_EQ(cuda::backend_name(), "emulated");
}

}  // namespace
