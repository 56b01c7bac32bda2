// The stream sanitizer through the public API, on whatever cuda backend ensure_cuda()
// gives (emulated devices without a GPU): the spec's incorrect stream example is caught
// and its corrected version is clean; each synchronisation orders; a block reused after
// record_stream starts clean. Disjoint parts, host accesses and frees without
// record_stream: test_sanitizer_host.cpp.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "ember/ember.h"
#include "emulated_support.h"
#include "runtime/backend.h"
#include "sanitizer/sanitizer.h"
#include "sanitizer_fixture.h"
#include "test_support.h"

namespace ember {
namespace {

using testing::drain_unseen;
using testing::ensure_cuda;
using testing::hex;
using testing::Sanitizer;
namespace csan = cuda::sanitizer;

TEST_F(Sanitizer, SpecIncorrectExampleIsCaught) {
  cuda::Stream s;
  Tensor a = cuda_normal({100, 100});
  std::string message;
  {
    cuda::StreamGuard guard(s);
    message = testing::error_of<DataRaceError>([&] { (void)sum(a); });  // sum() may start before normal_() finishes
  }
  EXPECT_EQ(
      message.rfind("CSAN detected a possible data race on tensor with data pointer " + hex(a.data_ptr()) + "\n", 0),
      0u)
      << message;
  EXPECT_NE(message.find(" during kernel:\nsum\nreading from argument: input\nWith stack trace:\n  #0 "),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("\nPrevious access by stream "), std::string::npos) << message;
  EXPECT_NE(message.find("(default) on cuda:0 during kernel:\nnormal_\nwriting to argument: output\n"),
            std::string::npos)
      << message;
  // Each access's stack names the code that issued it: the test body, twice.
  const std::string body = "Sanitizer_SpecIncorrectExampleIsCaught_Test::TestBody";
  size_t first = message.find(body);
  ASSERT_NE(first, std::string::npos) << message;
  EXPECT_NE(message.find(body, first + 1), std::string::npos) << message;
}

TEST_F(Sanitizer, SpecCorrectedExampleIsClean) {
  cuda::Stream s;
  Tensor a = cuda_normal({100, 100});
  Tensor b;
  s.wait_stream(cuda::current_stream());
  {
    cuda::StreamGuard guard(s);
    b = sum(a);
    a.record_stream(s);
  }
  cuda::current_stream().wait_stream(s);
  Tensor expected = a.cpu().sum();
  EXPECT_NEAR(b.item<float>(), expected.item<float>(), 1e-2);
}

TEST_F(Sanitizer, ARacingCallDoesNotRunAndLeavesTheHistory) {
  cuda::Stream s;
  Tensor a = full({4}, 1.0, TensorOptions().device(kCUDA));
  {
    cuda::StreamGuard guard(s);
    EXPECT_THROW(a.fill_(5.0), DataRaceError);  // write after write
    EXPECT_THROW(a.fill_(5.0), DataRaceError);  // still unordered: nothing was recorded
  }
  s.wait_stream(cuda::current_stream());
  {
    cuda::StreamGuard guard(s);
    a.add_(a);
  }
  cuda::current_stream().wait_stream(s);
  EXPECT_EQ(a.cpu().sum().item<float>(), 8.0f);  // 1 + 1 each: the refused fill_ never ran
}

TEST_F(Sanitizer, WarnModePrintsTheReportAndRunsTheCall) {
  csan::enable(csan::Mode::Warn);
  cuda::Stream s;
  Tensor a = full({4}, 2.0, TensorOptions().device(kCUDA));
  drain_unseen();
  Tensor b;
  ::testing::internal::CaptureStderr();
  {
    cuda::StreamGuard guard(s);
    b = a.mul(a);
  }
  std::string printed = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(csan::warnings(), 1);
  EXPECT_NE(printed.find("CSAN detected a possible data race on tensor with data pointer " + hex(a.data_ptr())),
            std::string::npos)
      << printed;
  cuda::current_stream().wait_stream(s);
  EXPECT_EQ(b.cpu().sum().item<float>(), 16.0f);
}

TEST_F(Sanitizer, EventRecordAndWaitOrder) {
  cuda::Stream s;
  Tensor a = cuda_normal({16});
  cuda::Event e = cuda::current_stream().record_event();
  s.wait_event(e);
  cuda::StreamGuard guard(s);
  EXPECT_NO_THROW(a.mul_(a));
}

TEST_F(Sanitizer, AnEventRecordedBeforeTheWriteDoesNotOrderIt) {
  cuda::Stream s;
  Tensor a = empty({16}, TensorOptions().device(kCUDA));
  cuda::Event e = cuda::current_stream().record_event();
  a.normal_();
  s.wait_event(e);
  cuda::StreamGuard guard(s);
  EXPECT_THROW(a.mul_(a), DataRaceError);
}

TEST_F(Sanitizer, StreamSynchronizeOrders) {
  cuda::Stream s;
  Tensor a = cuda_normal({16});
  cuda::current_stream().synchronize();
  cuda::StreamGuard guard(s);
  EXPECT_NO_THROW(a.mul_(a));
}

TEST_F(Sanitizer, EventSynchronizeOrders) {
  cuda::Stream s;
  Tensor a = cuda_normal({16});
  cuda::current_stream().record_event().synchronize();
  cuda::StreamGuard guard(s);
  EXPECT_NO_THROW(a.mul_(a));
}

TEST_F(Sanitizer, DeviceSynchronizeOrders) {
  cuda::Stream s;
  Tensor a = cuda_normal({16});
  cuda::synchronize();
  cuda::StreamGuard guard(s);
  EXPECT_NO_THROW(a.mul_(a));
}

TEST_F(Sanitizer, ConcurrentReadsAreFineAWriteAfterThemIsNot) {
  cuda::Stream s1, s2;
  Tensor a = cuda_normal({16});
  s1.wait_stream(cuda::current_stream());
  s2.wait_stream(cuda::current_stream());
  Tensor b1, b2;
  {
    cuda::StreamGuard guard(s1);
    b1 = a.sum();
  }
  {
    cuda::StreamGuard guard(s2);
    b2 = a.sum();
  }
  std::string message = testing::error_of<DataRaceError>([&] { a.fill_(0.0); });  // write after read
  EXPECT_NE(message.find("fill_\nwriting to argument: output"), std::string::npos) << message;
  EXPECT_NE(message.find("sum\nreading from argument: input"), std::string::npos) << message;
  cuda::current_stream().wait_stream(s1);
  cuda::current_stream().wait_stream(s2);
  EXPECT_NO_THROW(a.fill_(0.0));
}

TEST_F(Sanitizer, CopiesAreAccesses) {
  cuda::Stream s;
  Tensor host = full({64}, 3.0).pin_memory();
  Tensor device = empty({64}, TensorOptions().device(kCUDA));
  device.copy_(host, /*non_blocking=*/true);  // writes `device` on the current stream
  {
    cuda::StreamGuard guard(s);
    EXPECT_THROW_MSG((void)device.sum(), DataRaceError, "copy_ (host to device)\nwriting to argument: destination");
  }
  // A blocking copy to the host synchronises: any stream may then touch the tensor.
  EXPECT_EQ(device.cpu().sum().item<float>(), 192.0f);
  cuda::StreamGuard guard(s);
  EXPECT_NO_THROW(device.fill_(1.0));
}

TEST_F(Sanitizer, CrossDeviceCopiesAreOrdered) {
  EMBER_REQUIRE_DEVICES(2);
  Tensor a = cuda_normal({32});
  Tensor b = a.to(Device(kCUDA, 1));
  EXPECT_NO_THROW(b.mul_(b));
  EXPECT_NO_THROW(a.mul_(a));
}

TEST_F(Sanitizer, ARacingAccessOnAnotherDeviceIsCaught) {
  EMBER_REQUIRE_DEVICES(2);
  cuda::DeviceGuard device(1);
  cuda::Stream s(1);
  Tensor a = cuda_normal({32});
  ASSERT_EQ(a.device(), Device(kCUDA, 1));
  cuda::StreamGuard guard(s);
  EXPECT_THROW_MSG(a.mul_(a), DataRaceError, "(default) on cuda:1 during kernel:\nnormal_");
}

TEST_F(Sanitizer, ReusedDeviceBlockStartsAFreshHistory) {
  EMBER_REQUIRE_EMULATED();
  cuda::Stream s;
  const void* first = nullptr;
  {
    Tensor a = cuda_normal({256});
    first = a.data_ptr();
    s.wait_stream(cuda::current_stream());
    cuda::StreamGuard guard(s);
    Tensor b = a.mul(a);
    a.record_stream(s);
  }
  // Let s finish without telling the sanitizer, as the allocator sees it: only the
  // allocator's own event queries know the block is free again.
  testing::emulated().synchronize(s.state()->native());
  Tensor c = empty({256}, TensorOptions().device(kCUDA));
  ASSERT_EQ(c.data_ptr(), first) << "the caching allocator should hand the block out again";
  EXPECT_NO_THROW(c.fill_(1.0));
}

TEST_F(Sanitizer, ReusedPinnedBlockStartsAFreshHistory) {
  EMBER_REQUIRE_EMULATED();
  cuda::Stream s;
  const void* first = nullptr;
  Tensor device = empty({64}, TensorOptions().device(kCUDA));
  {
    Tensor host = full({64}, 1.0).pin_memory();
    first = host.data_ptr();
    cuda::StreamGuard guard(s);
    device.copy_(host, /*non_blocking=*/true);  // reads `host` on s; the copy records s on it
  }
  testing::emulated().synchronize(s.state()->native());
  Tensor again = empty({64}, TensorOptions().pinned_memory(true));
  ASSERT_EQ(again.data_ptr(), first) << "the pinned allocator should hand the block out again";
  // Written on the default stream, which never ordered itself after s's read of the old block.
  Tensor twos = full({64}, 2.0, TensorOptions().device(kCUDA));
  EXPECT_NO_THROW(again.copy_(twos, /*non_blocking=*/true));
}

TEST_F(Sanitizer, HostThreadsOnTheirOwnStreamsAreClean) {
  std::vector<std::thread> threads;
  std::vector<float> sums(4, 0.0f);
  std::vector<std::string> errors(4);
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] {
      try {
        cuda::Stream s;
        cuda::StreamGuard guard(s);
        Tensor t = full({64}, static_cast<double>(i + 1), TensorOptions().device(kCUDA));
        for (int k = 0; k < 10; ++k) t.add_(t);
        sums[static_cast<size_t>(i)] = t.cpu().sum().item<float>();
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(i)] = e.what();
      }
    });
  }
  for (auto& thread : threads) thread.join();
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(errors[static_cast<size_t>(i)], "");
    EXPECT_EQ(sums[static_cast<size_t>(i)], 64.0f * 1024.0f * static_cast<float>(i + 1));
  }
}

TEST_F(Sanitizer, DisabledItReportsNothing) {
  csan::disable();
  EXPECT_FALSE(csan::is_enabled());
  cuda::Stream s;
  Tensor a = cuda_normal({16});
  drain_unseen();
  cuda::StreamGuard guard(s);
  EXPECT_NO_THROW((void)a.sum());
}

// Note [Sanitizer hooks]: enable() installs the decorator the runtime hands out (the runtime
// names no sanitizer header), disable() removes it.
TEST_F(Sanitizer, EnableInstallsTheRuntimesBackendDecorator) {
  EXPECT_NE(&detail::backend(), &detail::undecorated_backend());
  EXPECT_EQ(detail::backend_or_null(), &detail::backend());
  csan::disable();
  EXPECT_EQ(&detail::backend(), &detail::undecorated_backend());
  EXPECT_EQ(detail::backend_or_null(), &detail::undecorated_backend());
  csan::enable();
  EXPECT_NE(&detail::backend(), &detail::undecorated_backend());
}

// Note [Sanitizer hooks]: selecting the backend (the fixture's SetUp, first in this process
// when ctest runs each test alone) ran the sanitizer's selection hook, which applied the variable.
TEST_F(Sanitizer, BackendSelectionAppliesTheEnvironmentVariable) {
  const char* value = std::getenv("EMBER_CUDA_SANITIZER");
  if (value == nullptr || std::string(value) != "1") GTEST_SKIP() << "runs under EMBER_CUDA_SANITIZER=1";
  EXPECT_TRUE(was_enabled_);
  EXPECT_EQ(was_mode_, csan::Mode::Error);
}

TEST_F(Sanitizer, EnvironmentVariable) {
  const char* old = std::getenv("EMBER_CUDA_SANITIZER");
  std::string saved = old ? old : "";
  setenv("EMBER_CUDA_SANITIZER", "sometimes", 1);
  EXPECT_THROW_MSG(detail::sanitizer::apply_env(), ValueError,
                   "EMBER_CUDA_SANITIZER must be 1, warn or 0, but got 'sometimes'");
  setenv("EMBER_CUDA_SANITIZER", "warn", 1);
  csan::disable();
  detail::sanitizer::apply_env();
  EXPECT_TRUE(csan::is_enabled());
  EXPECT_EQ(csan::mode(), csan::Mode::Warn);
  // The program's own enable()/disable() wins over the variable.
  csan::disable();
  detail::sanitizer::configure_from_env();
  EXPECT_FALSE(csan::is_enabled());
  setenv("EMBER_CUDA_SANITIZER", "0", 1);
  detail::sanitizer::apply_env();
  EXPECT_FALSE(csan::is_enabled());
  if (old) {
    setenv("EMBER_CUDA_SANITIZER", saved.c_str(), 1);
  } else {
    unsetenv("EMBER_CUDA_SANITIZER");
  }
}

}  // namespace
}  // namespace ember
