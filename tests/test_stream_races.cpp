// Tests that race on purpose (ctest label "races"): the spec's incorrect stream example,
// and the host and allocator races emulated devices make real (a host write to pinned
// memory a pending copy reads, a host read of a pinned destination before the copy
// wrote it, a block freed without record_stream overwritten while a side stream still
// reads it), each run with its race made to happen. Without the stream sanitizer the
// race's effect shows in the values; with EMBER_CUDA_SANITIZER=1 the racing call throws
// DataRaceError. Gates order the threads, so the data itself never races (TSan).
#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>

#include "ember/ember.h"
#include "emulated_support.h"
#include "test_support.h"

namespace ember {
namespace {

// A gate the default stream waits at, so that work queued behind it is still pending
// while another stream runs: the interleaving a real GPU may produce, made certain.
class Gate {
 public:
  void wait() {
    std::unique_lock lock(mutex_);
    opened_cv_.wait(lock, [&] { return open_; });
  }
  void open() {
    {
      std::lock_guard lock(mutex_);
      open_ = true;
    }
    opened_cv_.notify_all();
  }

 private:
  std::mutex mutex_;
  std::condition_variable opened_cv_;
  bool open_ = false;
};

TEST(StreamRaces, SumMayStartBeforeNormalFinishes) {
  EMBER_REQUIRE_EMULATED();  // host functions on a stream
  cuda::Stream s;
  Tensor a = zeros({100, 100}, TensorOptions().device(kCUDA));
  cuda::synchronize();
  Gate gate;
  testing::on_stream(cuda::current_stream(), [&gate] { gate.wait(); });
  a.fill_(1.0);  // queued behind the gate on the default stream
  Tensor b;
  bool raced = false;
  {
    cuda::StreamGuard guard(s);
    try {
      b = sum(a);  // the spec's incorrect code: no wait for the default stream
    } catch (const DataRaceError& err) {
      raced = true;
      EXPECT_NE(std::string(err.what()).find("fill_\nwriting to argument: output"), std::string::npos) << err.what();
    }
  }
  EXPECT_EQ(raced, cuda::sanitizer::is_enabled() && cuda::sanitizer::mode() == cuda::sanitizer::Mode::Error);
  if (b.defined()) {
    cuda::StreamGuard guard(s);              // the default stream is still held at the gate
    EXPECT_EQ(b.cpu().item<float>(), 0.0f);  // sum ran before fill_: the race happened
  }
  gate.open();
  cuda::synchronize();
  EXPECT_EQ(a.cpu().sum().item<float>(), 10000.0f);
}

bool sanitizer_refuses() {
  return cuda::sanitizer::is_enabled() && cuda::sanitizer::mode() == cuda::sanitizer::Mode::Error;
}

TEST(StreamRaces, HostWritesPinnedMemoryWhileACopyFromItIsPending) {
  EMBER_REQUIRE_EMULATED();
  cuda::Stream s;
  Tensor host = full({64}, 3.0).pin_memory();
  Tensor device = zeros({64}, TensorOptions().device(kCUDA));
  s.wait_stream(cuda::current_stream());
  Gate gate;
  testing::on_stream(s, [&gate] { gate.wait(); });
  {
    cuda::StreamGuard guard(s);
    device.copy_(host, /*non_blocking=*/true);  // queued behind the gate
  }
  bool raced = false;
  try {
    host.fill_(5.0);  // the copy has not read the 3s yet
  } catch (const DataRaceError& err) {
    raced = true;
    EXPECT_NE(std::string(err.what()).find("copy_ (host to device)\nreading from argument: source"), std::string::npos)
        << err.what();
  }
  EXPECT_EQ(raced, sanitizer_refuses());
  gate.open();
  s.synchronize();
  cuda::current_stream().wait_stream(s);
  EXPECT_EQ(device.sum().item<float>(), raced ? 192.0f : 320.0f);  // 320: the copy read the later 5s
}

TEST(StreamRaces, HostReadsAPinnedDestinationBeforeTheCopyWroteIt) {
  EMBER_REQUIRE_EMULATED();
  Tensor device = full({64}, 2.0, TensorOptions().device(kCUDA));
  Tensor host = full({64}, 0.0, TensorOptions().pinned_memory(true));
  cuda::synchronize();
  Gate gate;
  testing::on_stream(cuda::current_stream(), [&gate] { gate.wait(); });
  host.copy_(device, /*non_blocking=*/true);  // queued behind the gate
  bool raced = false;
  float seen = -1.0f;
  try {
    seen = host.sum().item<float>();
  } catch (const DataRaceError& err) {
    raced = true;
    EXPECT_NE(std::string(err.what()).find("copy_ (device to host)\nwriting to argument: destination"),
              std::string::npos)
        << err.what();
  }
  EXPECT_EQ(raced, sanitizer_refuses());
  if (!raced) {
    EXPECT_EQ(seen, 0.0f);  // the values from before the copy
  }
  gate.open();
  cuda::synchronize();
  EXPECT_EQ(host.sum().item<float>(), 128.0f);
}

TEST(StreamRaces, ABlockFreedWithoutRecordStreamIsReusedWhileASideStreamReadsIt) {
  EMBER_REQUIRE_EMULATED();
  cuda::Stream s;
  Tensor result;
  const void* first = nullptr;
  Gate gate;
  {
    Tensor a = full({256}, 1.0, TensorOptions().device(kCUDA));
    first = a.data_ptr();
    s.wait_stream(cuda::current_stream());
    testing::on_stream(s, [&gate] { gate.wait(); });
    cuda::StreamGuard guard(s);
    result = a.mul(a);  // queued behind the gate; the program forgot a.record_stream(s)
  }
  Tensor again = empty({256}, TensorOptions().device(kCUDA));
  ASSERT_EQ(again.data_ptr(), first) << "the caching allocator should hand the block out again";
  bool raced = false;
  try {
    again.fill_(0.0);
  } catch (const DataRaceError& err) {
    raced = true;
    EXPECT_NE(std::string(err.what()).find("mul\nreading from argument: input"), std::string::npos) << err.what();
  }
  EXPECT_EQ(raced, sanitizer_refuses());
  cuda::current_stream().synchronize();  // the fill_ (if it ran) is done before s reads
  gate.open();
  s.synchronize();
  EXPECT_EQ(result.sum().item<float>(), raced ? 256.0f : 0.0f);  // 0: mul read the new owner's zeros
}

}  // namespace
}  // namespace ember
