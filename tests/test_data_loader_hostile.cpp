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

}  // namespace
}  // namespace ember::testing
