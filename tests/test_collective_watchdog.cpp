// CollectiveWatchdog (the nccl group's timeout): collectives that finish are forgotten,
// the first one to outlive the timeout aborts once and fails every pending and later
// collective with PyTorch's watchdog wording. Completion here is a flag the test sets.
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <string>

#include "distributed/collective_watchdog.h"
#include "ember/errors.h"

using ember::detail::distributed::CollectiveWatchdog;
using namespace std::chrono_literals;

namespace {

/// The error a watched collective was failed with, once it was.
struct Outcome {
  std::promise<std::string> promise;
  std::future<std::string> future = promise.get_future();
  std::function<void(const std::exception_ptr&)> fail() {
    return [this](const std::exception_ptr& error) {
      try {
        std::rethrow_exception(error);
      } catch (const ember::DistributedError& e) {
        promise.set_value(std::string("DistributedError: ") + e.what());
      } catch (const std::exception& e) {
        promise.set_value(std::string("other: ") + e.what());
      }
    };
  }
};

TEST(CollectiveWatchdog, TheFirstCollectivePastTheTimeoutAbortsAndFailsThePendingAndLaterOnes) {
  std::promise<std::string> aborted;
  std::atomic<int> aborts{0};
  Outcome first, stuck, later;
  {
    CollectiveWatchdog watchdog(1, 20ms, [&](const std::string& message) {
      if (aborts++ == 0) aborted.set_value(message);
    });
    watchdog.watch(
        1, "broadcast", [] { return true; }, first.fail());  // done by the first look
    watchdog.watch(
        2, "all_reduce", [] { return false; }, stuck.fail());

    std::string message = aborted.get_future().get();
    const std::string head =
        "[Rank 1] Watchdog caught collective operation timeout: all_reduce (collective #2, "
        "Timeout(ms)=20) ran for ";
    const std::string tail = " milliseconds before timing out";
    ASSERT_EQ(message.rfind(head, 0), 0u) << message;
    ASSERT_GT(message.size(), head.size() + tail.size());
    EXPECT_EQ(message.substr(message.size() - tail.size()), tail);
    EXPECT_GE(std::stoi(message.substr(head.size())), 20);

    EXPECT_EQ(stuck.future.get(), "DistributedError: " + message);
    watchdog.watch(
        3, "barrier", [] { return true; }, later.fail());
    EXPECT_EQ(later.future.get(), "DistributedError: " + message);
    EXPECT_EQ(watchdog.failure(), message);
  }
  EXPECT_EQ(aborts.load(), 1);
  EXPECT_EQ(first.future.wait_for(0s), std::future_status::timeout);  // finished in time: never failed
}

TEST(CollectiveWatchdog, AQueryThatThrowsFailsThatCollectiveOnly) {
  std::atomic<int> aborts{0};
  Outcome broken;
  CollectiveWatchdog watchdog(0, 1h, [&](const std::string&) { ++aborts; });
  watchdog.watch(
      1, "all_gather", []() -> bool { throw ember::CudaError("CUDA error: an illegal memory access was encountered"); },
      broken.fail());
  EXPECT_EQ(broken.future.get(), "other: CUDA error: an illegal memory access was encountered");
  EXPECT_EQ(watchdog.failure(), "");
  EXPECT_EQ(aborts.load(), 0);
}

TEST(CollectiveWatchdog, StopsWithCollectivesStillWithinTheTimeout) {
  std::atomic<int> aborts{0};
  Outcome pending;
  {
    CollectiveWatchdog watchdog(0, 1h, [&](const std::string&) { ++aborts; });
    watchdog.watch(
        1, "all_reduce", [] { return false; }, pending.fail());
  }
  EXPECT_EQ(aborts.load(), 0);
  EXPECT_EQ(pending.future.wait_for(0s), std::future_status::timeout);
}

}  // namespace
