// With CUDA_LAUNCH_BLOCKING=1 every launch waits, so a kernel error is raised at the
// call that caused it. The variable is read when the backend starts: its own process.
#include <chrono>
#include <cstdlib>

#include "test_support.h"

using namespace ember;

namespace {

TEST(LaunchBlocking, ErrorAtTheCallThatCausedIt) {
  setenv("CUDA_LAUNCH_BLOCKING", "1", 1);
  EMBER_REQUIRE_DEVICES(1);
  auto x = ones({4}, Device("cuda:0"));
  EXPECT_THROW(x.index_select(0, tensor({5}).cuda()), CudaError);
  cuda::reset_device(0);
  // Launches complete before the host goes on.
  cuda::sleep(std::chrono::milliseconds(10));
  EXPECT_TRUE(cuda::current_stream().query());
}

}  // namespace
