// A kernel failure is reported asynchronously: not at the call, but at the next
// synchronizing call on that device, with the CUDA_LAUNCH_BLOCKING hint.
#include "test_support.h"

using namespace ember;

namespace {

TEST(AsyncErrors, IndexOutOfRangeIsStickyAndReportedLater) {
  EMBER_REQUIRE_DEVICES(2);
  auto x = ones({4}, Device("cuda:1"));
  auto bad = tensor({0, 9}).to(Device("cuda:1"));
  Tensor y;
  EXPECT_NO_THROW(y = x.index_select(0, bad));  // enqueued, not yet run
  try {
    cuda::synchronize(1);
    ADD_FAILURE() << "the kernel error was not reported";
  } catch (const CudaError& err) {
    std::string msg = err.what();
    EXPECT_NE(msg.find("device-side assert triggered"), std::string::npos) << msg;
    EXPECT_NE(msg.find("CUDA_LAUNCH_BLOCKING=1"), std::string::npos) << msg;
  }
  // Sticky: later synchronizing calls on that device fail too; other devices are fine.
  EXPECT_THROW(x.sum().item<float>(), CudaError);
  EXPECT_EQ(ones({2}, Device("cuda:0")).sum().item<float>(), 2.f);
  cuda::reset_device(1);
  EXPECT_EQ(ones({3}, Device("cuda:1")).sum().item<float>(), 3.f);
}

}  // namespace
