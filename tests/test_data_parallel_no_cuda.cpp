// Without cuda devices nn::DataParallel simply calls its module, as PyTorch's does.
#include <gtest/gtest.h>

#include <cstdlib>

#include "ember/ember.h"

namespace ember {
namespace {

const bool kNoEmulation = [] {
  unsetenv("EMBER_EMULATED_DEVICES");
  return true;
}();

TEST(DataParallelNoCuda, CallsTheModule) {
  if (cuda::is_available()) GTEST_SKIP() << "a cuda device is present";
  auto net = std::make_shared<nn::Linear>(3, 2);
  nn::DataParallel dp(net, {0, 1});
  EXPECT_TRUE(dp.device_ids().empty());
  Tensor x = randn({4, 3});
  Tensor out = dp(x);
  EXPECT_TRUE(out.is_cpu());
  EXPECT_TRUE(out.equal((*net)(x)));
  out.sum().backward();
  EXPECT_TRUE(net->weight.grad().defined());
}

}  // namespace
}  // namespace ember
