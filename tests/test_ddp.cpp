// nn::parallel::DistributedDataParallel: bucket assignment alone (Note [DDP buckets]),
// the errors a single process can show, and the training behaviour on 2 and 3 ranks
// launched through ember-run running tests/distributed/ddp_worker.cpp.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "ember/ember.h"
#include "launch_test_util.h"
#include "parallel/reducer.h"

namespace dist = ember::distributed;
using ember::nn::parallel::detail::compute_bucket_assignment_by_size;
using Buckets = std::vector<std::vector<size_t>>;

namespace {

std::vector<ember::Tensor> of_bytes(const std::vector<int64_t>& float_counts, ember::DType dtype = ember::kFloat32) {
  std::vector<ember::Tensor> out;
  for (int64_t n : float_counts) out.push_back(ember::zeros({n}, dtype));
  return out;
}

TEST(BucketAssignment, ReverseOrderFirstLimitThenTheRest) {
  // 4-byte floats: 40, 80, 120, 160, 200 bytes; limits 100 then 150 bytes.
  auto tensors = of_bytes({10, 20, 30, 40, 50});
  EXPECT_EQ(compute_bucket_assignment_by_size(tensors, {100, 150}), (Buckets{{4}, {3}, {2, 1}, {0}}));
  EXPECT_EQ(compute_bucket_assignment_by_size(tensors, {1000}), (Buckets{{4, 3, 2, 1, 0}}));
  EXPECT_EQ(compute_bucket_assignment_by_size(tensors, {0}), (Buckets{{4}, {3}, {2}, {1}, {0}}));
  EXPECT_EQ(compute_bucket_assignment_by_size(tensors, {400, 1}), (Buckets{{4, 3, 2}, {1}, {0}}));
  EXPECT_EQ(compute_bucket_assignment_by_size({}, {100}), Buckets{});
}

TEST(BucketAssignment, DtypesAndDevicesNeverShareABucket) {
  std::vector<ember::Tensor> tensors{ember::zeros({4}), ember::zeros({4}, ember::kFloat64), ember::zeros({4}),
                                     ember::zeros({4}, ember::kFloat64)};
  // Each (device, dtype) has its own limits; buckets in the order backward fills them.
  EXPECT_EQ(compute_bucket_assignment_by_size(tensors, {1000}), (Buckets{{3, 1}, {2, 0}}));
  EXPECT_EQ(compute_bucket_assignment_by_size(tensors, {16, 1000}), (Buckets{{3}, {2}, {1}, {0}}));
}

TEST(DistributedDataParallelErrors, NeedsAProcessGroupAndAParameterThatRequiresGrad) {
  auto net = std::make_shared<ember::nn::Linear>(2, 2);
  EXPECT_THROW(ember::nn::parallel::DistributedDataParallel ddp(net), ember::DistributedError);
  auto path = std::filesystem::temp_directory_path() / ("ember_ddp_" + std::to_string(::getpid()));
  std::filesystem::remove(path);
  dist::init_process_group("gloo", dist::InitOptions().init_method("file://" + path.string()).rank(0).world_size(1));
  net->weight.requires_grad_(false);
  net->bias.requires_grad_(false);
  try {
    ember::nn::parallel::DistributedDataParallel ddp(net);
    ADD_FAILURE() << "no error";
  } catch (const ember::ValueError& e) {
    EXPECT_STREQ(e.what(),
                 "DistributedDataParallel is not needed when a module doesn't have any parameter that requires a "
                 "gradient.");
  }
  net->weight.requires_grad_(true);
  try {
    ember::nn::parallel::DistributedDataParallel ddp(net, ember::nn::parallel::DDPOptions().device_ids({0, 1}));
    ADD_FAILURE() << "no error";
  } catch (const ember::ValueError& e) {
    EXPECT_STREQ(e.what(), "device_ids can only be None or contain a single element.");
  }
  ember::Tensor x = ember::ones({3, 2});
  {
    // A world of one: the gradient is this process's own.
    ember::nn::parallel::DistributedDataParallel ddp(net);
    ddp(x).sum().backward();
    EXPECT_TRUE(net->weight.grad().equal(ember::full({2, 2}, 3.0f)));
    ddp(x);  // prepared for a backward pass that never comes
  }
  // The module outlives its DDP: its hooks then do nothing.
  net->zero_grad();
  net->forward(x).sum().backward();
  EXPECT_TRUE(net->weight.grad().equal(ember::full({2, 2}, 3.0f)));
  dist::destroy_process_group();
}

std::string launch_command(int ranks) {
  return std::string(EMBER_RUN_PATH) + " --nproc-per-node=" + std::to_string(ranks) + " --term-timeout=10 " +
         EMBER_DDP_WORKER_PATH;
}

TEST(DistributedDataParallelLaunch, TwoRanks) {
  Launch launch = run(launch_command(2));
  EXPECT_EQ(launch.status, 0) << launch.output;
}

TEST(DistributedDataParallelLaunch, ThreeRanks) {
  Launch launch = run(launch_command(3));
  EXPECT_EQ(launch.status, 0) << launch.output;
}

}  // namespace
