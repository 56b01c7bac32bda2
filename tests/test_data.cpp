// ember::data datasets and samplers: TensorDataset, FashionMNIST, the samplers' orders and
// DistributedSampler's partitions. Expected orders and labels come from PyTorch 1.13
// (torch.randperm, RandomSampler, DistributedSampler) and Debian's dataset-fashion-mnist.
#include <gtest/gtest.h>

#include <stdexcept>

#include "data/collate.h"
#include "ember/ember.h"
#include "test_support.h"

namespace ember::testing {
namespace {

using data::DistributedSampler;
using data::RandomSampler;
using data::SequentialSampler;
using Indices = std::vector<size_t>;

TEST(DataSamplers, SequentialCountsUp) {
  SequentialSampler s(4);
  EXPECT_EQ(s.size(), 4u);
  EXPECT_EQ(s.indices(), (Indices{0, 1, 2, 3}));
  EXPECT_EQ(s.indices(), (Indices{0, 1, 2, 3}));
}

TEST(DataSamplers, RandomMatchesPyTorchEpochAfterEpoch) {
  // g = torch.Generator(); g.manual_seed(5); s = RandomSampler(range(10), generator=g); list(s); list(s)
  RandomSampler s(10, 5);
  EXPECT_EQ(s.size(), 10u);
  EXPECT_EQ(s.indices(), (Indices{1, 4, 9, 6, 3, 5, 0, 2, 8, 7}));
  EXPECT_EQ(s.indices(), (Indices{7, 5, 0, 4, 3, 9, 6, 8, 1, 2}));
  RandomSampler again(10, 5), other(10, 6);
  EXPECT_EQ(again.indices(), (Indices{1, 4, 9, 6, 3, 5, 0, 2, 8, 7}));
  EXPECT_NE(other.indices(), (Indices{1, 4, 9, 6, 3, 5, 0, 2, 8, 7}));
}

// Every rank's list, concatenated rank by rank.
std::vector<Indices> partition(size_t n, int replicas, bool shuffle, bool drop_last, uint64_t epoch = 0) {
  std::vector<Indices> out;
  for (int r = 0; r < replicas; ++r) {
    DistributedSampler s(n, replicas, r, shuffle, /*seed=*/0, drop_last);
    s.set_epoch(epoch);
    out.push_back(s.indices());
    EXPECT_EQ(out.back().size(), s.size());
  }
  return out;
}

TEST(DataSamplers, DistributedPartitionsAsPyTorch) {
  // [list(DistributedSampler(range(10), num_replicas=3, rank=r, shuffle=False)) for r in range(3)]
  EXPECT_EQ(partition(10, 3, false, false), (std::vector<Indices>{{0, 3, 6, 9}, {1, 4, 7, 0}, {2, 5, 8, 1}}));
  EXPECT_EQ(partition(10, 3, false, true), (std::vector<Indices>{{0, 3, 6}, {1, 4, 7}, {2, 5, 8}}));
  EXPECT_EQ(partition(10, 4, false, false), (std::vector<Indices>{{0, 4, 8}, {1, 5, 9}, {2, 6, 0}, {3, 7, 1}}));
  // Fewer items than replicas: padding repeats them several times.
  EXPECT_EQ(partition(2, 5, false, false), (std::vector<Indices>{{0}, {1}, {0}, {1}, {0}}));
  EXPECT_EQ(partition(2, 5, false, true), (std::vector<Indices>(5)));
  DistributedSampler s(10, 3, 0, false, 0, false);
  EXPECT_EQ(s.size(), 4u);
  EXPECT_EQ(s.total_size(), 12u);
}

TEST(DataSamplers, DistributedShuffleFollowsSeedAndEpoch) {
  // DistributedSampler(range(10), num_replicas=3, rank=1, shuffle=True, seed=0): epoch 0, then set_epoch(1)
  DistributedSampler s(10, 3, 1, /*shuffle=*/true, /*seed=*/0);
  EXPECT_EQ(s.indices(), (Indices{1, 3, 8, 4}));
  EXPECT_EQ(s.indices(), (Indices{1, 3, 8, 4}));  // the same epoch gives the same order
  s.set_epoch(1);
  EXPECT_EQ(s.epoch(), 1u);
  EXPECT_EQ(s.indices(), (Indices{6, 0, 3, 5}));
  // The ranks of one epoch cover every index.
  std::vector<int> seen(10, 0);
  for (const Indices& rank : partition(10, 3, true, false, 7))
    for (size_t i : rank) ++seen[i];
  for (size_t i = 0; i < 10; ++i) EXPECT_GE(seen[i], 1) << i;
}

TEST(DataSamplers, DistributedRejectsBadRanks) {
  EXPECT_THROW_MSG(DistributedSampler(10, 2, 2), ValueError, "Invalid rank 2, rank should be in the interval [0, 1]");
  EXPECT_THROW_MSG(DistributedSampler(10, 2, -1), ValueError, "Invalid rank -1, rank should be in the interval [0, 1]");
  EXPECT_THROW_MSG(DistributedSampler(10, 0, 0), ValueError, "num_replicas should be a positive integer");
}

TEST(DataTensorDataset, RowsOfTwoTensors) {
  data::TensorDataset ds(arange(12, kFloat32).view({6, 2}), arange(6));
  EXPECT_EQ(ds.size(), 6u);
  data::Example e = ds.get(4);
  EXPECT_EQ(e.data.to_vector<float>(), (std::vector<float>{8, 9}));
  EXPECT_EQ(e.target.item<int64_t>(), 4);
  EXPECT_EQ(e.target.dim(), 0);
  EXPECT_THROW_MSG(ds.get(6), IndexError, "index 6 is out of bounds for dimension 0 with size 6");
  EXPECT_THROW_MSG(data::TensorDataset(zeros({3, 2}), zeros({4})), ValueError, "Size mismatch between tensors");
}

TEST(DataCollate, StacksItemsAndChecksShapes) {
  Tensor batch = data::detail::stack_items({tensor({1, 2}), tensor({3, 4}), tensor({5, 6})});
  EXPECT_EQ(batch.sizes(), (IntList{3, 2}));
  EXPECT_EQ(batch.to_vector<int64_t>(), (std::vector<int64_t>{1, 2, 3, 4, 5, 6}));
  // Like torch.stack, mixed dtypes promote.
  Tensor mixed = data::detail::stack_items({tensor({1}), tensor({0.5})});
  EXPECT_EQ(mixed.dtype(), kFloat32);
  EXPECT_THROW_MSG(data::detail::stack_items({zeros({2}), zeros({3})}), ValueError,
                   "stack expects each tensor to be equal size, but got [2] at entry 0 and [3] at entry 1");
  // Non-contiguous items take ember::stack's element-wise copy: same values.
  Tensor square = arange(4).view({2, 2});
  EXPECT_EQ(data::detail::stack_items({square.t(), square}).to_vector<int64_t>(),
            (std::vector<int64_t>{0, 2, 1, 3, 0, 1, 2, 3}));
  EXPECT_FALSE(data::detail::stack_items({Tensor(), Tensor()}).defined());
}

const data::FashionMNIST& fashion_train() {
  static const data::FashionMNIST ds("/usr/share/datasets/fashion-mnist", /*train=*/true);
  return ds;
}

TEST(DataFashionMNIST, SizesAndKnownItems) {
  const data::FashionMNIST& train = fashion_train();
  EXPECT_EQ(train.size(), 60000u);
  data::Example first = train.get(0);
  EXPECT_EQ(first.data.sizes(), (IntList{1, 28, 28}));
  EXPECT_EQ(first.data.dtype(), kFloat32);
  EXPECT_EQ(first.target.dtype(), kInt64);
  // The first training image is an ankle boot (9); its centre pixel is 217 (numpy on the IDX bytes).
  EXPECT_EQ(first.target.item<int64_t>(), 9);
  EXPECT_EQ(first.data[0][14][14].item<float>(), 217.0f / 255.0f);
  EXPECT_NEAR(first.data.sum().item<double>(), 299.00784, 1e-3);
  EXPECT_EQ(train.targets().slice(0, 0, 10).to_vector<int64_t>(), (std::vector<int64_t>{9, 0, 0, 3, 0, 2, 7, 2, 5, 5}));
  EXPECT_EQ(first.data.min().item<float>(), 0.0f);
  EXPECT_EQ(first.data.max().item<float>(), 1.0f);  // its brightest pixel is 255
  EXPECT_EQ(train.images().sizes(), (IntList{60000, 1, 28, 28}));

  data::FashionMNIST test("/usr/share/datasets/fashion-mnist", /*train=*/false);
  EXPECT_EQ(test.size(), 10000u);
  EXPECT_EQ(test.targets().slice(0, 0, 10).to_vector<int64_t>(), (std::vector<int64_t>{9, 2, 1, 1, 6, 1, 4, 6, 5, 7}));
  EXPECT_THROW_MSG(test.get(10000), IndexError, "index 10000 is out of bounds for dimension 0 with size 10000");
}

TEST(DataFashionMNIST, MissingFilesSayWhere) {
  EXPECT_THROW_MSG(data::FashionMNIST("/nonexistent"), Error,
                   "FashionMNIST: cannot open /nonexistent/train-images-idx3-ubyte.gz");
}

}  // namespace
}  // namespace ember::testing
