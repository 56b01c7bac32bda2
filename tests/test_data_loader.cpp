// DataLoader: order whatever the number of workers, PyTorch's shuffled orders, drop_last
// (an epoch without a full batch is empty),
// worker errors at their batch's position, timeouts, early exit and destruction, persistent
// workers, samplers given by reference, and pinned batches on cuda devices. Expected
// shuffled orders come from PyTorch 1.13 (DataLoader(range(10), shuffle=True,
// generator=torch.Generator().manual_seed(5)) and DistributedSampler).
#include <gtest/gtest.h>

#include <stdexcept>

#include "data_test_util.h"
#include "ember/ember.h"
#include "test_support.h"

namespace ember::testing {
namespace {

using data::DataLoader;
using data::DataLoaderOptions;
using Batches = std::vector<std::vector<int64_t>>;

TEST(DataLoader, InOrderWhateverTheNumberOfWorkers) {
  ProbeDataset ds(10);
  for (int workers : {0, 1, 3}) {
    SCOPED_TRACE(workers);
    DataLoader loader(ds, DataLoaderOptions().batch_size(4).num_workers(workers));
    EXPECT_EQ(loader.size(), 3u);
    EXPECT_EQ(epoch_targets(loader), (Batches{{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9}}));
    for (const data::Example& batch : loader) {
      EXPECT_EQ(batch.data.dim(), 2);
      EXPECT_EQ(batch.data.size(1), 1);
      EXPECT_EQ(batch.data.dtype(), kFloat32);
      EXPECT_TRUE(batch.data.view({-1}).to(kInt64).equal(batch.target));
    }
  }
}

TEST(DataLoader, DropLastDropsTheShortBatch) {
  ProbeDataset ds(10);
  for (int workers : {0, 2}) {
    DataLoader loader(ds, DataLoaderOptions().batch_size(4).drop_last(true).num_workers(workers));
    EXPECT_EQ(loader.size(), 2u);
    EXPECT_EQ(epoch_targets(loader), (Batches{{0, 1, 2, 3}, {4, 5, 6, 7}}));
  }
  ProbeDataset exact(8);
  EXPECT_EQ(DataLoader(exact, DataLoaderOptions().batch_size(4).drop_last(true)).size(), 2u);
}

// drop_last over fewer samples than a batch: every epoch is empty and ends at once, as
// PyTorch's (`list(DataLoader(range(3), batch_size=4, drop_last=True))` is []), whatever the
// workers, the order, pinning or the epoch; nothing is loaded.
TEST(DataLoader, AnEpochWithoutAFullBatchEndsAtOnce) {
  ensure_cuda();  // emulated devices when there is no GPU: the pin-memory thread runs too
  ProbeDataset ds(3);
  const bool pin = cuda::is_available();
  for (int workers : {0, 2}) {
    for (bool shuffle : {false, true}) {
      for (bool persistent : {false, true}) {
        if (persistent && workers == 0) continue;
        SCOPED_TRACE(::testing::Message()
                     << workers << " workers, shuffle " << shuffle << ", persistent " << persistent);
        DataLoader loader(ds, DataLoaderOptions()
                                  .batch_size(4)
                                  .drop_last(true)
                                  .num_workers(workers)
                                  .shuffle(shuffle)
                                  .persistent_workers(persistent)
                                  .pin_memory(pin));
        EXPECT_EQ(loader.size(), 0u);
        for (int epoch = 0; epoch < 3; ++epoch) {
          EXPECT_TRUE(loader.begin() == loader.end());
          EXPECT_EQ(epoch_targets(loader), Batches{});
        }
      }
    }
  }
  EXPECT_EQ(ds.calls(), 0u);
  ProbeDataset none(0);  // an empty dataset, in order, is an empty epoch too
  DataLoader empty_loader(none, DataLoaderOptions().batch_size(2).num_workers(1));
  EXPECT_EQ(empty_loader.size(), 0u);
  EXPECT_EQ(epoch_targets(empty_loader), Batches{});
}

TEST(DataLoader, BatchesArriveInOrderWhenWorkersFinishOutOfOrder) {
  // Batch i goes to worker i % 3. Batch 0's item waits until the workers of batches 1 and 2
  // have started on batches 4 and 5, that is until batches 1 and 2 have been delivered.
  ProbeDataset* self = nullptr;
  bool waited = false;
  ProbeDataset ds(6, [&](size_t i) {
    if (i == 0) waited = self->wait_started(4) && self->wait_started(5);
  });
  self = &ds;
  DataLoader loader(ds, DataLoaderOptions().batch_size(1).num_workers(3));
  EXPECT_EQ(epoch_targets(loader), (Batches{{0}, {1}, {2}, {3}, {4}, {5}}));
  EXPECT_TRUE(waited);
}

TEST(DataLoader, ShuffleIsSeededAndMatchesPyTorch) {
  ProbeDataset ds(10);
  for (int workers : {0, 3}) {
    SCOPED_TRACE(workers);
    DataLoader loader(ds, DataLoaderOptions().batch_size(4).shuffle(true).seed(5).num_workers(workers));
    EXPECT_EQ(epoch_targets(loader), (Batches{{7, 4, 8, 1}, {2, 3, 6, 5}, {9, 0}}));
    EXPECT_EQ(epoch_targets(loader), (Batches{{2, 1, 6, 3}, {5, 9, 4, 7}, {8, 0}}));
  }
  DataLoader other(ds, DataLoaderOptions().batch_size(4).shuffle(true).seed(6));
  EXPECT_NE(epoch_targets(other), (Batches{{7, 4, 8, 1}, {2, 3, 6, 5}, {9, 0}}));
}

TEST(DataLoader, RefersToTheSamplerItWasGiven) {
  // for epoch in 0, 1: s.set_epoch(epoch); list(DistributedSampler(range(10), 3, rank=1, seed=0))
  ProbeDataset ds(10);
  data::DistributedSampler sampler(ds.size(), /*num_replicas=*/3, /*rank=*/1, /*shuffle=*/true, /*seed=*/0);
  DataLoaderOptions options = DataLoaderOptions().batch_size(4).num_workers(2).persistent_workers(true);
  options.sampler(sampler);
  DataLoader loader(ds, options);
  EXPECT_EQ(loader.size(), 1u);
  EXPECT_EQ(epoch_targets(loader), (Batches{{1, 3, 8, 4}}));
  sampler.set_epoch(1);
  EXPECT_EQ(epoch_targets(loader), (Batches{{6, 0, 3, 5}}));
}

TEST(DataLoader, PersistentWorkersServeEveryEpoch) {
  ProbeDataset ds(9);
  DataLoader loader(ds, DataLoaderOptions().batch_size(2).num_workers(2).persistent_workers(true));
  Batches expected{{0, 1}, {2, 3}, {4, 5}, {6, 7}, {8}};
  EXPECT_EQ(epoch_targets(loader), expected);
  EXPECT_EQ(epoch_targets(loader), expected);
  EXPECT_EQ(ds.threads().size(), 2u);  // the same two threads loaded both epochs
  // A new epoch stops an unfinished one's iterator, as PyTorch resets it.
  auto first = loader.begin();
  EXPECT_EQ((*first).target.to_vector<int64_t>(), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(epoch_targets(loader), expected);
  EXPECT_THROW_MSG(++first, Error, "this iterator's epoch was stopped");
}

struct OddError {
  const char* what() const { return "not a std::exception"; }
};

TEST(DataLoader, WorkerErrorIsRethrownAtItsBatch) {
  ProbeDataset ds(10, [](size_t i) {
    if (i == 5) throw ValueError("item 5 is broken");
  });
  DataLoader loader(ds, DataLoaderOptions().batch_size(2).num_workers(3));
  auto it = loader.begin();
  EXPECT_EQ(it->target.to_vector<int64_t>(), (std::vector<int64_t>{0, 1}));
  ++it;
  EXPECT_EQ(it->target.to_vector<int64_t>(), (std::vector<int64_t>{2, 3}));
  try {
    ++it;  // batch 2, items 4 and 5, loaded by worker 2
    ADD_FAILURE() << "no error";
  } catch (const ValueError& e) {
    EXPECT_EQ(std::string(e.what()), "Caught ValueError in DataLoader worker process 2.\nitem 5 is broken");
  }
  ++it;  // the loader goes on after the failed batch, as PyTorch's
  EXPECT_EQ(it->target.to_vector<int64_t>(), (std::vector<int64_t>{6, 7}));

  // Without workers the error reaches the caller unchanged.
  DataLoader inline_loader(ds, DataLoaderOptions().batch_size(2));
  EXPECT_THROW_MSG(epoch_targets(inline_loader), ValueError, "item 5 is broken");
  try {
    epoch_targets(inline_loader);
  } catch (const ValueError& e) {
    EXPECT_EQ(std::string(e.what()), "item 5 is broken");
  }
}

TEST(DataLoader, WorkerErrorsKeepStandardTypes) {
  ProbeDataset std_error(2, [](size_t) { throw std::out_of_range("no such item"); });
  DataLoader a(std_error, DataLoaderOptions().num_workers(1));
  EXPECT_THROW_MSG(a.begin(), std::out_of_range,
                   "Caught std::out_of_range in DataLoader worker process 0.\nno such item");
  ProbeDataset odd_error(2, [](size_t) { throw OddError(); });
  DataLoader b(odd_error, DataLoaderOptions().num_workers(1));
  EXPECT_THROW_MSG(b.begin(), Error, "OddError in DataLoader worker process 0.");
}

TEST(DataLoader, TimeoutSaysHowLongItWaited) {
  Gate gate;
  ProbeDataset ds(4, [&](size_t i) {
    if (i == 1) gate.wait();
  });
  DataLoader loader(ds, DataLoaderOptions().num_workers(1).timeout(std::chrono::milliseconds(50)));
  auto it = loader.begin();
  EXPECT_EQ(it->target.item<int64_t>(), 0);
  EXPECT_THROW_MSG(++it, Error, "DataLoader timed out after 0.05 seconds");
  gate.open();
  ++it;  // waits for batch 1 again; once it arrived the loader joins its worker on the way out
  EXPECT_EQ(it->target.item<int64_t>(), 1);
}

TEST(DataLoader, LeavingEarlyJoinsTheWorkers) {
  for (bool persistent : {false, true}) {
    SCOPED_TRACE(persistent);
    ProbeDataset ds(1000);
    {
      DataLoader loader(ds, DataLoaderOptions().num_workers(3).persistent_workers(persistent));
      int seen = 0;
      for (const data::Example& batch : loader) {
        EXPECT_EQ(batch.target.item<int64_t>(), seen);
        if (++seen == 2) break;
      }
    }
    // Two batches taken, at most prefetch_factor * num_workers more were queued.
    EXPECT_LE(ds.calls(), 8u);
  }
}

TEST(DataLoader, DestroyingTheLoaderStopsItsIterators) {
  ProbeDataset ds(100);
  auto loader = std::make_unique<DataLoader>(ds, DataLoaderOptions().num_workers(2).pin_memory(false));
  auto it = loader->begin();
  EXPECT_EQ(it->target.item<int64_t>(), 0);
  loader.reset();  // joins the workers now, not when `it` goes
  size_t calls = ds.calls();
  EXPECT_LE(calls, 5u);
  EXPECT_THROW_MSG(++it, Error, "this iterator's epoch was stopped");
  EXPECT_EQ(ds.calls(), calls);
}

TEST(DataLoader, RejectsInconsistentOptions) {
  ProbeDataset ds(4);
  data::SequentialSampler sampler(4);
  EXPECT_THROW_MSG(DataLoader(ds, DataLoaderOptions().batch_size(0)), ValueError,
                   "batch_size should be a positive integer value, but got batch_size=0");
  EXPECT_THROW_MSG(DataLoader(ds, DataLoaderOptions().num_workers(-1)), ValueError,
                   "num_workers option should be non-negative; use num_workers=0 to disable multiprocessing.");
  EXPECT_THROW_MSG(DataLoader(ds, DataLoaderOptions().persistent_workers(true)), ValueError,
                   "persistent_workers option needs num_workers > 0");
  EXPECT_THROW_MSG(DataLoader(ds, DataLoaderOptions().prefetch_factor(2)), ValueError,
                   "prefetch_factor option could only be specified in multiprocessing");
  EXPECT_THROW_MSG(DataLoader(ds, DataLoaderOptions().num_workers(1).prefetch_factor(0)), ValueError,
                   "prefetch_factor option should be a positive integer, but got prefetch_factor=0");
  EXPECT_THROW_MSG(DataLoader(ds, DataLoaderOptions().timeout(std::chrono::milliseconds(-1))), ValueError,
                   "timeout option should be non-negative");
  EXPECT_THROW_MSG(DataLoader(ds, DataLoaderOptions().shuffle(true).sampler(sampler)), ValueError,
                   "sampler option is mutually exclusive with shuffle");
}

TEST(DataLoader, PinnedBatchesOnCudaDevices) {
  EMBER_REQUIRE_DEVICES(1);
  data::TensorDataset ds(arange(40, kFloat32).view({10, 4}), arange(10));
  for (int workers : {0, 2}) {
    SCOPED_TRACE(workers);
    DataLoader loader(ds, DataLoaderOptions().batch_size(4).num_workers(workers).pin_memory(true));
    int64_t row = 0;
    for (const data::Example& batch : loader) {
      EXPECT_TRUE(batch.data.is_pinned());
      EXPECT_TRUE(batch.target.is_pinned());
      Tensor on_device = batch.data.to(Device(kCUDA, 0), /*non_blocking=*/true);
      EXPECT_TRUE(on_device.is_cuda());
      EXPECT_TRUE(on_device.cpu().equal(arange(row * 4, (row + batch.data.size(0)) * 4, 1, kFloat32).view({-1, 4})));
      row += batch.data.size(0);
    }
    EXPECT_EQ(row, 10);
  }
  DataLoader pageable(ds, DataLoaderOptions().batch_size(4));
  for (const data::Example& batch : pageable) EXPECT_FALSE(batch.data.is_pinned());
}

}  // namespace
}  // namespace ember::testing
