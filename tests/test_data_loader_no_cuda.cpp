// Without a cuda device, pin_memory leaves batches in pageable memory (PyTorch warns and
// goes on), with and without workers.
#include <gtest/gtest.h>

#include <cstdlib>

#include "data_test_util.h"
#include "ember/ember.h"

namespace ember::testing {
namespace {

const bool kNoEmulation = [] {
  unsetenv("EMBER_EMULATED_DEVICES");
  return true;
}();

TEST(DataLoaderNoCuda, PinMemoryDoesNothing) {
  if (cuda::is_available()) GTEST_SKIP() << "a cuda device is present";
  ProbeDataset ds(5);
  for (int workers : {0, 2}) {
    SCOPED_TRACE(workers);
    data::DataLoader loader(ds, data::DataLoaderOptions().batch_size(2).num_workers(workers).pin_memory(true));
    std::vector<std::vector<int64_t>> targets;
    for (const data::Example& batch : loader) {
      EXPECT_FALSE(batch.data.is_pinned());
      EXPECT_FALSE(batch.target.is_pinned());
      targets.push_back(batch.target.to_vector<int64_t>());
    }
    EXPECT_EQ(targets, (std::vector<std::vector<int64_t>>{{0, 1}, {2, 3}, {4}}));
  }
}

}  // namespace
}  // namespace ember::testing
