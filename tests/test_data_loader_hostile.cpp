// DataLoader under hostile use (issue 27): non-positive sizes, worker errors of standard
// types that carry more than a message, and a worker stuck in Dataset::get() past the
// timeout. Messages are PyTorch 2.x's (torch/utils/data/sampler.py, dataloader.py).
#include <gtest/gtest.h>

#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <limits>
#include <new>
#include <optional>
#include <set>
#include <system_error>

#include "data/worker_pool.h"
#include "data_test_util.h"
#include "ember/ember.h"
#include "test_support.h"

namespace ember::testing {
namespace {

using data::DataLoader;
using data::DataLoaderOptions;

// ---- sizes ----------------------------------------------------------------------

TEST(DataLoaderHostile, NonPositiveBatchSizesAreRefused) {
  // torch.utils.data.DataLoader(range(4), batch_size=-1) raises this ValueError.
  ProbeDataset ds(4);
  EXPECT_THROW_MSG(DataLoader(ds, DataLoaderOptions().batch_size(-1)), ValueError,
                   "batch_size should be a positive integer value, but got batch_size=-1");
  EXPECT_THROW_MSG(DataLoader(ds, DataLoaderOptions().batch_size(std::numeric_limits<int64_t>::min())), ValueError,
                   "but got batch_size=-9223372036854775808");
  EXPECT_THROW_MSG(DataLoader(ds, DataLoaderOptions().batch_size(0)), ValueError,
                   "batch_size should be a positive integer value, but got batch_size=0");
  // Existing call sites: int literals, int64_t and size_t values.
  size_t unsigned_size = 3;
  int64_t signed_size = 2;
  EXPECT_EQ(DataLoader(ds, DataLoaderOptions().batch_size(unsigned_size)).size(), 2u);
  EXPECT_EQ(DataLoader(ds, DataLoaderOptions().batch_size(signed_size)).size(), 2u);
  EXPECT_EQ(DataLoaderOptions().batch_size(-5).batch_size(), int64_t{-5});  // kept as given, refused by the loader
}

// ---- worker errors ---------------------------------------------------------------

// Runs one epoch of a one-worker loader over a dataset whose get() calls `thrower`, and
// hands the error to `check` as `E`; any other type is a failure.
template <typename E, typename Thrower, typename Check>
void expect_worker_error(Thrower thrower, Check check) {
  ProbeDataset ds(2, [&](size_t) { thrower(); });
  DataLoader loader(ds, DataLoaderOptions().num_workers(1));
  try {
    loader.begin();
    ADD_FAILURE() << "no error";
  } catch (const E& e) {
    check(e);
  } catch (const std::exception& e) {
    ADD_FAILURE() << "another type: " << e.what();
  }
}

bool starts_with(const std::exception& e, const std::string& prefix) {
  return std::string(e.what()).rfind(prefix, 0) == 0;
}

TEST(DataLoaderHostile, WorkerErrorsKeepTheirTypeAndWhatTheyCarry) {
  using std::errc;
  expect_worker_error<std::system_error>(
      [] { throw std::system_error(std::make_error_code(errc::no_such_file_or_directory), "open items.bin"); },
      [](const std::system_error& e) {
        EXPECT_EQ(e.code(), errc::no_such_file_or_directory);
        EXPECT_EQ(std::string(e.what()),
                  "Caught std::system_error in DataLoader worker process 0.\n"
                  "open items.bin: No such file or directory");
      });
  expect_worker_error<std::bad_alloc>(
      [] { throw std::bad_alloc(); },
      [](const std::bad_alloc& e) {
        EXPECT_EQ(std::string(e.what()), "Caught std::bad_alloc in DataLoader worker process 0.\nstd::bad_alloc");
      });
  expect_worker_error<std::filesystem::filesystem_error>(
      [] {
        throw std::filesystem::filesystem_error("cannot open", "/data/items.bin",
                                                std::make_error_code(errc::permission_denied));
      },
      [](const std::filesystem::filesystem_error& e) {
        EXPECT_EQ(e.code(), errc::permission_denied);
        EXPECT_EQ(e.path1(), "/data/items.bin");
        EXPECT_TRUE(starts_with(e, "Caught std::filesystem::filesystem_error in DataLoader worker process 0.\n"))
            << e.what();
      });
  expect_worker_error<std::future_error>(
      [] { throw std::future_error(std::future_errc::broken_promise); },
      [](const std::future_error& e) {
        EXPECT_EQ(e.code(), std::future_errc::broken_promise);
        EXPECT_TRUE(starts_with(e, "Caught std::future_error in DataLoader worker process 0.\n")) << e.what();
      });
  expect_worker_error<std::bad_optional_access>(
      [] { (void)std::optional<int>().value(); },
      [](const std::bad_optional_access& e) {
        EXPECT_TRUE(starts_with(e, "Caught std::bad_optional_access in DataLoader worker process 0.\n")) << e.what();
      });
  // Message-only standard types and ember's keep theirs, as before.
  expect_worker_error<std::overflow_error>(
      [] { throw std::overflow_error("too big"); },
      [](const std::overflow_error& e) {
        EXPECT_EQ(std::string(e.what()), "Caught std::overflow_error in DataLoader worker process 0.\ntoo big");
      });
  expect_worker_error<IndexError>([] { throw IndexError("no item"); },
                                  [](const IndexError& e) {
                                    EXPECT_EQ(std::string(e.what()),
                                              "Caught IndexError in DataLoader worker process 0.\nno item");
                                  });
}

// ---- a worker stuck in get() ------------------------------------------------------

// What a StuckDataset reports; it outlives the dataset.
struct StuckEvents {
  std::mutex mutex;
  std::condition_variable cv;
  int entered = 0;        // stuck get() calls begun
  int returned = 0;       // stuck get() calls returned
  bool released = false;  // the stuck calls may return
  bool watchdog = false;  // a stuck call gave up after 30 s: the loader waited for it
  bool destroyed = false;

  void release() {
    {
      std::lock_guard lock(mutex);
      released = true;
    }
    cv.notify_all();
  }
  template <typename Pred>
  void wait(Pred pred) {
    std::unique_lock lock(mutex);
    cv.wait(lock, pred);
  }
  template <typename F>
  auto read(F f) {
    std::lock_guard lock(mutex);
    return f();
  }
};

// Item i is {[i], i}. The first get(i) of each i in `stuck` blocks until the test releases
// it (or, as a failure rather than a hang, until 30 s pass); every other get() first waits
// until every stuck item has been entered, so that a batch that arrives tells the test the
// stuck workers are inside get(). A released get() touches no member of the dataset, which
// may then be destroyed.
class StuckDataset : public data::Dataset {
 public:
  StuckDataset(size_t size, std::set<size_t> stuck, std::shared_ptr<StuckEvents> events)
      : size_(size), stuck_(std::move(stuck)), events_(std::move(events)) {}
  ~StuckDataset() override {
    {
      std::lock_guard lock(events_->mutex);
      events_->destroyed = true;
    }
    events_->cv.notify_all();
  }
  size_t size() const override { return size_; }
  data::Example get(size_t index) const override {
    std::shared_ptr<StuckEvents> events = events_;
    std::unique_lock lock(events->mutex);
    if (stuck_.count(index) != 0 && begun_.insert(index).second) {
      ++events->entered;
      events->cv.notify_all();
      if (!events->cv.wait_for(lock, kWatchdog, [&] { return events->released; })) events->watchdog = true;
      ++events->returned;
      events->cv.notify_all();
    } else {
      size_t all = stuck_.size();
      if (!events->cv.wait_for(lock, kWatchdog, [&] { return static_cast<size_t>(events->entered) >= all; }))
        events->watchdog = true;
    }
    return {full({1}, static_cast<double>(index), kFloat32), tensor(static_cast<int64_t>(index))};
  }

 private:
  static constexpr auto kWatchdog = std::chrono::seconds(30);
  size_t size_;
  std::set<size_t> stuck_;
  std::shared_ptr<StuckEvents> events_;
  mutable std::set<size_t> begun_;  // guarded by events_->mutex
};

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

constexpr auto kTimeout = std::chrono::milliseconds(50);

// Releases the stuck get() calls, waits until they returned and the workers left behind
// exited; a watchdog means the loader waited for a stuck get() before returning.
void release_and_wait(StuckEvents& events, int stuck) {
  events.release();
  events.wait([&] { return events.returned == stuck; });
  data::detail::wait_for_left_behind_workers();
  EXPECT_FALSE(events.read([&] { return events.watchdog; }));
}

TEST(DataLoaderHostile, LeavingTheLoopAfterATimeoutLeavesAStuckWorkerBehind) {
  // PyTorch raises at the timeout and terminates its workers; a thread cannot be killed, so
  // the loader leaves it behind and returns at once. Batch i goes to worker i % 2; worker 1
  // is stuck in get(1).
  for (bool persistent : {false, true}) {
    SCOPED_TRACE(persistent);
    auto events = std::make_shared<StuckEvents>();
    StuckDataset ds(2, {1}, events);
    ::testing::internal::CaptureStderr();
    {
      DataLoader loader(ds, DataLoaderOptions().num_workers(2).persistent_workers(persistent).timeout(kTimeout));
      std::vector<int64_t> seen;
      EXPECT_THROW_MSG(for (const data::Example& batch
                            : loader) seen.push_back(batch.target.item<int64_t>()),
                       Error, "DataLoader timed out after 0.05 seconds");
      EXPECT_EQ(seen, std::vector<int64_t>{0});
    }
    std::string err = ::testing::internal::GetCapturedStderr();
    // The loop was left and the loader destroyed while get(1) was still blocked.
    EXPECT_EQ(events->read([&] { return events->returned; }), 0);
    EXPECT_EQ(count(err, "UserWarning: DataLoader"), 1u) << err;
    EXPECT_NE(err.find("left worker thread 1 behind"), std::string::npos) << err;
    release_and_wait(*events, 1);
  }
}

TEST(DataLoaderHostile, AWorkerLeftBehindKeepsASharedDatasetAlive) {
  auto events = std::make_shared<StuckEvents>();
  auto ds = std::make_shared<StuckDataset>(2, std::set<size_t>{1}, events);
  ::testing::internal::CaptureStderr();
  {
    DataLoader loader(ds, DataLoaderOptions().num_workers(2).timeout(kTimeout));
    auto it = loader.begin();
    EXPECT_EQ(it->target.item<int64_t>(), 0);
    EXPECT_THROW_MSG(++it, Error, "DataLoader timed out after 0.05 seconds");
  }
  ::testing::internal::GetCapturedStderr();
  ds.reset();  // the worker inside get(1) is now the dataset's only owner
  EXPECT_FALSE(events->read([&] { return events->destroyed; }));
  events->release();
  events->wait([&] { return events->destroyed; });  // by the worker, once get(1) returned
  data::detail::wait_for_left_behind_workers();
  EXPECT_FALSE(events->read([&] { return events->watchdog; }));
}

TEST(DataLoaderHostile, EveryStuckWorkerIsLeftBehindWithOneWarning) {
  // Batch i goes to worker i % 3: batch 0 loads, workers 1 and 2 are stuck in get(1), get(2).
  auto events = std::make_shared<StuckEvents>();
  StuckDataset ds(3, {1, 2}, events);
  ::testing::internal::CaptureStderr();
  {
    DataLoader loader(ds, DataLoaderOptions().num_workers(3).timeout(kTimeout));
    auto it = loader.begin();
    EXPECT_EQ(it->target.item<int64_t>(), 0);
    EXPECT_THROW_MSG(++it, Error, "DataLoader timed out after 0.05 seconds");
  }
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(count(err, "UserWarning: DataLoader"), 1u) << err;
  EXPECT_NE(err.find("left worker threads 1, 2 behind"), std::string::npos) << err;
  release_and_wait(*events, 2);
}

TEST(DataLoaderHostile, AfterATimeoutTheNextIncrementWaitsForTheSameBatch) {
  // As PyTorch's iterator: a timeout does not skip the late batch, and once it arrives the
  // loader joins its workers again as usual (nothing is left behind, nothing is said).
  auto events = std::make_shared<StuckEvents>();
  StuckDataset ds(3, {1}, events);
  ::testing::internal::CaptureStderr();
  {
    DataLoader loader(ds, DataLoaderOptions().num_workers(2).timeout(kTimeout));
    auto it = loader.begin();
    EXPECT_EQ(it->target.item<int64_t>(), 0);
    EXPECT_THROW_MSG(++it, Error, "DataLoader timed out after 0.05 seconds");
    events->release();
    ++it;
    EXPECT_EQ(it->target.item<int64_t>(), 1);
    ++it;
    EXPECT_EQ(it->target.item<int64_t>(), 2);
    ++it;
    EXPECT_TRUE(it == loader.end());
  }
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
  EXPECT_EQ(events->read([&] { return events->returned; }), 1);
  EXPECT_FALSE(events->read([&] { return events->watchdog; }));
}

TEST(DataLoaderHostile, PersistentWorkersAreReplacedAfterATimeout) {
  // The next epoch is not queued behind a worker still stuck in the last one: worker 1 stays
  // in its first get(1) while a fresh worker 1 loads the second epoch.
  auto events = std::make_shared<StuckEvents>();
  StuckDataset ds(2, {1}, events);
  ::testing::internal::CaptureStderr();
  {
    DataLoader loader(ds, DataLoaderOptions().num_workers(2).persistent_workers(true).timeout(kTimeout));
    auto it = loader.begin();
    EXPECT_EQ(it->target.item<int64_t>(), 0);
    EXPECT_THROW_MSG(++it, Error, "DataLoader timed out after 0.05 seconds");
    std::vector<std::vector<int64_t>> second = epoch_targets(loader);
    EXPECT_EQ(second, (std::vector<std::vector<int64_t>>{{0}, {1}}));
    EXPECT_EQ(events->read([&] { return events->returned; }), 0);
  }
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(count(err, "UserWarning: DataLoader"), 1u) << err;
  release_and_wait(*events, 1);
}

TEST(DataLoaderHostileDeathTest, TheProcessExitsWithAWorkerStillStuck) {
  // A get() that never returns: the worker left behind does not keep the process from exiting.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        // Never released and never freed (a static root, not a leak to LeakSanitizer): the
        // stuck get() blocks on it until the process ends.
        static auto* ds = new StuckDataset(2, {1}, std::make_shared<StuckEvents>());
        {
          DataLoader loader(*ds, DataLoaderOptions().num_workers(2).timeout(kTimeout));
          try {
            for (const data::Example& batch : loader) (void)batch;
          } catch (const Error&) {
          }
        }
        std::exit(0);
      },
      ::testing::ExitedWithCode(0), "left worker thread 1 behind");
}

}  // namespace
}  // namespace ember::testing
