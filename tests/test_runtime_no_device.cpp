// Without emulation and without a GPU, cuda is unavailable and says how to emulate.
#include <gtest/gtest.h>

#include <cstdlib>

#include "ember/cuda.h"
#include "ember/errors.h"

namespace cuda = ember::cuda;

namespace {

const bool kNoEmulation = [] {
  unsetenv("EMBER_EMULATED_DEVICES");
  return true;
}();

TEST(RuntimeNoDevice, UnavailableWithAClearError) {
  if (cuda::backend_name() == "driver") GTEST_SKIP() << "a GPU is present";
  EXPECT_FALSE(cuda::is_available());
  EXPECT_EQ(cuda::device_count(), 0);
  EXPECT_EQ(cuda::backend_name(), "none");
  for (auto call : {+[] { cuda::current_device(); }, +[] { cuda::set_device(0); }, +[] { cuda::synchronize(); },
                    +[] { cuda::Stream s; }, +[] { cuda::Event().record(); }, +[] { cuda::current_stream(); },
                    +[] { cuda::MemPool pool; }}) {
    try {
      call();
      ADD_FAILURE() << "no error";
    } catch (const ember::CudaError& e) {
      std::string message = e.what();
      EXPECT_NE(message.find("No CUDA device is available"), std::string::npos) << message;
      EXPECT_NE(message.find("EMBER_EMULATED_DEVICES=N"), std::string::npos) << message;
      EXPECT_NE(message.find("ember::cuda::emulate(N)"), std::string::npos) << message;
    }
  }
  EXPECT_TRUE(cuda::Event().query());  // an event never recorded needs no device
}

}  // namespace
