// DataLoader under hostile use (issue 27): non-positive sizes, worker errors of standard
// types that carry more than a message, and a worker stuck in Dataset::get() past the
// timeout. Messages are PyTorch 2.x's (torch/utils/data/sampler.py, dataloader.py).
#include <gtest/gtest.h>

#include <filesystem>
#include <future>
#include <limits>
#include <new>
#include <optional>
#include <system_error>

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

TEST(DataLoaderHostile, WorkerErrorsKeepTheirTypeAndWhatTheyCarry) {
  expect_worker_error<std::system_error>(
      [] { throw std::system_error(std::make_error_code(std::errc::no_such_file_or_directory), "open items.bin"); },
      [](const std::system_error& e) {
        EXPECT_EQ(e.code(), std::errc::no_such_file_or_directory);
        EXPECT_EQ(std::string(e.what()),
                  "Caught std::system_error in DataLoader worker process 0.\nopen items.bin: No such file or directory");
      });
  expect_worker_error<std::bad_alloc>([] { throw std::bad_alloc(); }, [](const std::bad_alloc& e) {
    EXPECT_EQ(std::string(e.what()), "Caught std::bad_alloc in DataLoader worker process 0.\nstd::bad_alloc");
  });
  expect_worker_error<std::filesystem::filesystem_error>(
      [] {
        throw std::filesystem::filesystem_error("cannot open", "/data/items.bin",
                                                std::make_error_code(std::errc::permission_denied));
      },
      [](const std::filesystem::filesystem_error& e) {
        EXPECT_EQ(e.code(), std::errc::permission_denied);
        EXPECT_EQ(e.path1(), "/data/items.bin");
        EXPECT_NE(std::string(e.what()).find("Caught std::filesystem::filesystem_error in DataLoader worker process 0.\n"),
                  std::string::npos)
            << e.what();
      });
  expect_worker_error<std::future_error>([] { throw std::future_error(std::future_errc::broken_promise); },
                                         [](const std::future_error& e) {
                                           EXPECT_EQ(e.code(), std::future_errc::broken_promise);
                                           EXPECT_NE(std::string(e.what()).find("Caught std::future_error"),
                                                     std::string::npos);
                                         });
  expect_worker_error<std::bad_optional_access>([] { (void)std::optional<int>().value(); },
                                                [](const std::bad_optional_access& e) {
                                                  EXPECT_NE(std::string(e.what()).find("Caught std::bad_optional_access"),
                                                            std::string::npos);
                                                });
  // Message-only standard types and ember's keep theirs, as before.
  expect_worker_error<std::overflow_error>([] { throw std::overflow_error("too big"); },
                                           [](const std::overflow_error& e) {
                                             EXPECT_EQ(std::string(e.what()),
                                                       "Caught std::overflow_error in DataLoader worker process 0.\ntoo big");
                                           });
  expect_worker_error<IndexError>([] { throw IndexError("no item"); }, [](const IndexError& e) {
    EXPECT_EQ(std::string(e.what()), "Caught IndexError in DataLoader worker process 0.\nno item");
  });
}

}  // namespace
}  // namespace ember::testing
