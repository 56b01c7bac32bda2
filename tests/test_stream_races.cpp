// Tests that race on purpose (ctest label "races"): the spec's incorrect stream example,
// run with its race made to happen. Without the stream sanitizer the race's effect shows
// in the values; with EMBER_CUDA_SANITIZER=1 the racing call throws DataRaceError.
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
    cuda::StreamGuard guard(s);  // the default stream is still held at the gate
    EXPECT_EQ(b.cpu().item<float>(), 0.0f);  // sum ran before fill_: the race happened
  }
  gate.open();
  cuda::synchronize();
  EXPECT_EQ(a.cpu().sum().item<float>(), 10000.0f);
}

}  // namespace
}  // namespace ember
