// A bad EMBER_EMULATED_MEMORY is a ValueError naming the value, at every cuda call.
#include <gtest/gtest.h>

#include <cstdlib>

#include "ember/cuda.h"
#include "ember/errors.h"

namespace cuda = ember::cuda;

namespace {

const bool kEnvironment = [] {
  setenv("EMBER_EMULATED_DEVICES", "2", 1);
  setenv("EMBER_EMULATED_MEMORY", "lots", 1);
  return true;
}();

TEST(EmulatedEnvErrors, BadMemoryValue) {
  for (int attempt = 0; attempt < 2; ++attempt) {  // not cached as "no device"
    try {
      cuda::device_count();
      ADD_FAILURE() << "accepted EMBER_EMULATED_MEMORY=lots";
    } catch (const ember::ValueError& e) {
      EXPECT_NE(std::string(e.what()).find("EMBER_EMULATED_MEMORY"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("'lots'"), std::string::npos) << e.what();
    }
  }
  // Fixing the variable before the next call selects the backend after all.
  setenv("EMBER_EMULATED_MEMORY", "1GiB", 1);
  EXPECT_EQ(cuda::device_count(), 2);
}

}  // namespace
