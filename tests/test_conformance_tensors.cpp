// The spec's tensor-level rules, on whatever cuda backend the machine has (emulated
// devices without a GPU): placement, cross-device rules, streams and copies with data.
#include <chrono>

#include "test_support.h"

using namespace ember;
using namespace std::chrono_literals;

namespace {

TEST(SpecPlacement, TheSpecExample) {
  EMBER_REQUIRE_DEVICES(3);
  Device cuda("cuda"), cuda0("cuda:0"), cuda2("cuda:2");
  auto x = tensor({1., 2.}, cuda0);
  EXPECT_EQ(x.device().repr(), "device(type='cuda', index=0)");
  auto y = tensor({1., 2.}).cuda();
  EXPECT_EQ(y.device(), cuda0);
  {
    cuda::DeviceGuard guard(1);
    auto a = tensor({1., 2.}, cuda);
    auto b = tensor({1., 2.}).cuda();
    auto b2 = tensor({1., 2.}).to(cuda);
    EXPECT_EQ(a.device(), Device("cuda:1"));
    EXPECT_EQ(b.device(), Device("cuda:1"));
    EXPECT_EQ(b2.device(), Device("cuda:1"));
    auto c = a + b;
    EXPECT_EQ(c.device(), Device("cuda:1"));
    auto z = x + y;
    EXPECT_EQ(z.device(), cuda0);
    EXPECT_EQ(z.to_vector<float>(), (std::vector<float>{2, 4}));
    EXPECT_EQ(randn({2}, cuda2).device(), cuda2);
    EXPECT_EQ(randn({2}).to(cuda2).device(), cuda2);
    EXPECT_EQ(randn({2}).cuda(cuda2).device(), cuda2);
  }
  EXPECT_EQ(cuda::current_device(), 0);
}

TEST(SpecPlacement, CrossDeviceOpsAreErrorsCopiesAreNot) {
  EMBER_REQUIRE_DEVICES(2);
  auto a = ones({2}, Device("cuda:0"));
  auto b = ones({2}, Device("cuda:1"));
  EXPECT_THROW_MSG(a + b, DeviceError,
                   "Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cuda:1!");
  EXPECT_THROW_MSG(a.matmul(ones({2}, Device("cuda:1"))), DeviceError, "same device");
  EXPECT_THROW_MSG(a + ones({2}), DeviceError, "cuda:0 and cpu");
  EXPECT_EQ((a + tensor(2.0)).to_vector<float>(), (std::vector<float>{3, 3}));  // 0-dim cpu tensor as a scalar
  EXPECT_EQ((a + b.to(a.device())).device(), a.device());
  auto c = zeros({2}, Device("cuda:1"));
  c.copy_(a);
  EXPECT_EQ(c.to_vector<float>(), (std::vector<float>{1, 1}));
}

TEST(SpecPlacement, CudaFactoriesNeedACudaDevice) {
  EMBER_REQUIRE_DEVICES(1);
  EXPECT_THROW_MSG(tensor({1}).cuda(Device("cpu")), ValueError, "Expected a cuda device, but got: cpu");
  EXPECT_THROW(zeros({2}, Device("cuda:64")), IndexError);
}

TEST(SpecAsync, OpsRunOnTheTensorsDeviceAndItsCurrentStream) {
  EMBER_REQUIRE_DEVICES(2);
  auto x = zeros({4}, Device("cuda:0"));
  cuda::Stream s1(1);
  {
    cuda::StreamGuard guard(s1);  // current device 1, current stream s1 there
    cuda::sleep(50ms);
    auto y = x + 1;  // runs on device 0's current stream, not behind s1's sleep
    EXPECT_EQ(y.device(), Device("cuda:0"));
    cuda::Event e;
    e.record(cuda::current_stream(0));
    e.synchronize();
    EXPECT_FALSE(s1.query());  // device 1 still busy: the op did not queue there
  }
  s1.synchronize();
}

TEST(SpecAsync, WorkIsQueuedAndCopiesSynchronize) {
  EMBER_REQUIRE_DEVICES(1);
  auto x = zeros({1000}, Device("cuda:0"));
  cuda::sleep(50ms);
  x.fill_(3);
  EXPECT_FALSE(cuda::current_stream().query());  // the host did not wait
  // A blocking device-to-host copy waits for the queued work.
  EXPECT_EQ(x.sum().item<float>(), 3000.f);
  EXPECT_TRUE(cuda::current_stream().query());
}

TEST(SpecAsync, NonBlockingCopyFromPinnedMemoryReturnsAtOnce) {
  EMBER_REQUIRE_DEVICES(1);
  auto host = arange(1 << 16, kFloat32).pin_memory();
  cuda::sleep(50ms);
  auto dev = host.to(Device("cuda:0"), /*non_blocking=*/true);
  EXPECT_FALSE(cuda::current_stream().query());
  cuda::Event done;
  done.record();
  done.synchronize();
  EXPECT_TRUE(equal(dev.cpu(), host));
  // From pageable memory the blocking form synchronizes the stream.
  auto pageable = arange(16, kFloat32);
  cuda::sleep(20ms);
  auto dev2 = pageable.to(Device("cuda:0"));
  EXPECT_TRUE(cuda::current_stream().query());
  EXPECT_TRUE(equal(dev2.cpu(), pageable));
}

TEST(SpecStreams, WaitStreamOrdersTheSpecExample) {
  EMBER_REQUIRE_DEVICES(1);
  cuda::Stream s;
  cuda::sleep(30ms);  // make the race visible: normal_ is queued behind a busy kernel
  auto A = empty({100, 100}, Device("cuda")).normal_(0.0, 1.0);
  s.wait_stream(cuda::current_stream());
  Tensor B;
  {
    cuda::StreamGuard guard(s);
    B = sum(A);
    A.record_stream(s);
  }
  s.synchronize();
  float expected = A.sum().item<float>();
  EXPECT_FLOAT_EQ(B.item<float>(), expected);
}

TEST(SpecStreams, CrossDeviceCopyIsOrderedOnBothDevices) {
  EMBER_REQUIRE_DEVICES(2);
  auto src = zeros({256}, Device("cuda:0"));
  cuda::sleep(30ms);
  src.fill_(7);  // queued behind the sleep on device 0
  auto dst = src.to(Device("cuda:1"));
  auto doubled = dst * 2;  // device 1's stream waits for the copy
  EXPECT_EQ(doubled.max().item<float>(), 14.f);
  EXPECT_EQ(doubled.min().item<float>(), 14.f);
}

}  // namespace
