// The program each rank runs in test_ddp's launches (ember-run, 2 and 3 ranks): GoogleTest
// tests of nn::parallel::DistributedDataParallel, every rank running the same tests in the
// same order, on cpu tensors and on one emulated cuda device per rank (cuda:LOCAL_RANK).
//
// Expected gradients come from this rank's own single-process reference: a copy of rank
// 0's initial model run on the whole batch (all ranks' slices concatenated). With a mean
// loss and equal slices, DDP's average of the ranks' gradients equals the reference's.
#include <gtest/gtest.h>

#include <cstdlib>
#include <limits>
#include <string>

#include "ember/ember.h"
#include "test_support.h"

namespace dist = ember::distributed;
namespace nn = ember::nn;
using ember::Tensor;
using ember::testing::error_of;
using nn::parallel::DDPOptions;
using nn::parallel::DistributedDataParallel;

namespace {

int rank() { return dist::get_rank(); }
int world() { return dist::get_world_size(); }
constexpr int64_t kSlice = 4;  // rows per rank

std::shared_ptr<nn::Sequential> mlp(const std::vector<int64_t>& widths, uint64_t seed) {
  ember::manual_seed(seed);
  auto net = std::make_shared<nn::Sequential>();
  for (size_t i = 0; i + 1 < widths.size(); ++i) {
    if (i > 0) net->push_back(std::make_shared<nn::ReLU>());
    net->push_back(std::make_shared<nn::Linear>(widths[i], widths[i + 1]));
  }
  return net;
}

/// The whole batch (every rank's slice), the same on every rank.
std::pair<Tensor, Tensor> batch(int64_t in, int64_t out, uint64_t seed) {
  ember::manual_seed(seed);
  return {ember::randn({kSlice * world(), in}), ember::randn({kSlice * world(), out})};
}
Tensor slice_of(const Tensor& t, int r) { return t.narrow(0, r * kSlice, kSlice); }

/// Every rank's copy of `t` equals rank 0's.
bool same_on_every_rank(const Tensor& t) {
  std::vector<Tensor> all;
  for (int r = 0; r < world(); ++r) all.push_back(ember::empty_like(t));
  dist::all_gather(all, t.contiguous());
  for (int r = 1; r < world(); ++r) {
    if (!all[r].cpu().equal(all[0].cpu())) return false;
  }
  return true;
}

void expect_grads_close(const std::vector<Tensor>& got, const std::vector<Tensor>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_TRUE(got[i].grad().defined()) << what << " parameter " << i;
    EXPECT_TRUE(got[i].grad().cpu().allclose(want[i].grad().cpu(), 1e-4, 1e-5))
        << what << " parameter " << i << ": largest difference "
        << (got[i].grad().cpu() - want[i].grad().cpu()).abs().max().item<float>();
  }
}

class DDP : public ::testing::TestWithParam<std::string> {
 protected:
  ember::Device device() const {
    return GetParam() == "cpu" ? ember::Device("cpu") : ember::Device("cuda:" + std::to_string(rank()));
  }
};

TEST_P(DDP, AdoptsRankZerosWeightsAndAveragesGradientsAsOneProcessOnTheWholeBatch) {
  auto net = mlp({8, 16, 4}, 100 + rank());  // different weights on every rank
  net->to(device());
  DistributedDataParallel ddp(net, DDPOptions().gradient_as_bucket_view(false));
  auto reference = mlp({8, 16, 4}, 100);  // rank 0's initial weights
  reference->to(device());
  auto params = net->parameters(), ref_params = reference->parameters();
  for (size_t i = 0; i < params.size(); ++i) EXPECT_TRUE(params[i].cpu().equal(ref_params[i].cpu())) << i;
  EXPECT_EQ(ddp.bucket_indices(), (std::vector<std::vector<size_t>>{{3, 2, 1, 0}}));

  ember::optim::SGD ddp_opt(ddp.parameters(), ember::optim::SGDOptions(0.1));
  ember::optim::SGD ref_opt(reference->parameters(), ember::optim::SGDOptions(0.1));
  for (int step = 0; step < 3; ++step) {
    auto [x, y] = batch(8, 4, 7 + step);
    x = x.to(device()), y = y.to(device());
    // Step 1 runs on a side stream, ordered after the default stream's work and before its later work.
    std::optional<ember::cuda::StreamGuard> side;
    std::optional<ember::cuda::Stream> default_stream;
    if (step == 1 && device().is_cuda()) {
      default_stream = ember::cuda::current_stream(device().index());
      ember::cuda::Stream stream(device().index());
      stream.wait_stream(*default_stream);
      side.emplace(stream);
    }
    ddp_opt.zero_grad();
    nn::functional::mse_loss(ddp(slice_of(x, rank())), slice_of(y, rank())).backward();
    ref_opt.zero_grad();
    nn::functional::mse_loss(reference->forward(x), y).backward();
    expect_grads_close(params, ref_params, "step " + std::to_string(step));
    ddp_opt.step();
    ref_opt.step();
    if (default_stream) default_stream->wait_stream(ember::cuda::current_stream(device().index()));
  }
}

TEST_P(DDP, TinyBucketsGiveOneBucketPerParameterAfterTheFirstMebibyte) {
  // Reverse order: 2.bias .. 1.weight (1 MiB) fill the first bucket; then one per tensor.
  std::vector<int64_t> widths{16, 512, 512, 4};
  auto net = mlp(widths, 5);
  net->to(device());
  DistributedDataParallel ddp(net, DDPOptions().bucket_cap_mb(1e-6));
  EXPECT_EQ(ddp.bucket_indices(), (std::vector<std::vector<size_t>>{{5, 4, 3, 2}, {1}, {0}}));
  DistributedDataParallel defaults(mlp(widths, 5)->to(device()).shared_from_this());
  EXPECT_EQ(defaults.bucket_indices(), (std::vector<std::vector<size_t>>{{5, 4, 3, 2}, {1, 0}}));

  auto reference = mlp(widths, 5);
  reference->to(device());
  auto [x, y] = batch(16, 4, 11);
  x = x.to(device()), y = y.to(device());
  nn::functional::mse_loss(ddp(slice_of(x, rank())), slice_of(y, rank())).backward();
  nn::functional::mse_loss(reference->forward(x), y).backward();
  expect_grads_close(net->parameters(), reference->parameters(), "tiny buckets");
}

TEST_P(DDP, GradientAsBucketViewKeepsGradientsInTheBuckets) {
  auto net = mlp({8, 16, 4}, 21);
  net->to(device());
  DistributedDataParallel ddp(net, DDPOptions().gradient_as_bucket_view(true));
  auto reference = mlp({8, 16, 4}, 21);
  reference->to(device());
  auto params = net->parameters();
  std::vector<void*> storage;
  for (int step = 0; step < 2; ++step) {
    auto [x, y] = batch(8, 4, 30 + step);
    x = x.to(device()), y = y.to(device());
    ddp.zero_grad(/*set_to_none=*/false);
    reference->zero_grad();
    nn::functional::mse_loss(ddp(slice_of(x, rank())), slice_of(y, rank())).backward();
    nn::functional::mse_loss(reference->forward(x), y).backward();
    expect_grads_close(params, reference->parameters(), "step " + std::to_string(step));
    std::vector<void*> now;
    for (const Tensor& p : params) now.push_back(p.grad().data_ptr());
    if (step == 0) {
      storage = now;
      // One bucket: the views lie back to back, in reverse parameter order.
      EXPECT_EQ(static_cast<char*>(storage[2]) - static_cast<char*>(storage[3]), 4 * 4);
      EXPECT_EQ(static_cast<char*>(storage[1]) - static_cast<char*>(storage[2]), 4 * 16 * 4);
    } else {
      EXPECT_EQ(now, storage);  // accumulated in place: the same views
    }
  }
}

TEST_P(DDP, NoSyncAccumulatesLocallyAndTheNextBackwardAveragesTheSum) {
  auto net = mlp({8, 16, 4}, 40);
  net->to(device());
  DistributedDataParallel ddp(net, DDPOptions());
  auto local = mlp({8, 16, 4}, 40), reference = mlp({8, 16, 4}, 40);
  local->to(device());
  reference->to(device());
  auto [x1, y1] = batch(8, 4, 41);
  auto [x2, y2] = batch(8, 4, 42);
  x1 = x1.to(device()), y1 = y1.to(device()), x2 = x2.to(device()), y2 = y2.to(device());
  {
    auto guard = ddp.no_sync();
    nn::functional::mse_loss(ddp(slice_of(x1, rank())), slice_of(y1, rank())).backward();
  }
  nn::functional::mse_loss(local->forward(slice_of(x1, rank())), slice_of(y1, rank())).backward();
  expect_grads_close(net->parameters(), local->parameters(), "inside no_sync (this rank's own)");

  nn::functional::mse_loss(ddp(slice_of(x2, rank())), slice_of(y2, rank())).backward();
  nn::functional::mse_loss(reference->forward(x1), y1).backward();
  nn::functional::mse_loss(reference->forward(x2), y2).backward();
  expect_grads_close(net->parameters(), reference->parameters(), "after no_sync");
}

/// Linear a always; Linear b when `use_b` (b's output added to a's).
struct TwoHeads : nn::Module {
  TwoHeads() {
    a = register_module("a", std::make_shared<nn::Linear>(8, 4));
    b = register_module("b", std::make_shared<nn::Linear>(8, 4));
  }
  Tensor forward(const Tensor& x) override { return use_b ? a->forward(x) + b->forward(x) : a->forward(x); }
  std::shared_ptr<nn::Linear> a, b;
  bool use_b = false;
};

TEST_P(DDP, AnUnusedParameterWithoutFindUnusedParametersFailsTheNextForward) {
  ember::manual_seed(50);
  auto net = std::make_shared<TwoHeads>();
  net->to(device());
  DistributedDataParallel ddp(net);
  Tensor x = ember::randn({kSlice, 8}).to(device());
  ddp(x).sum().backward();  // b gets no gradient: its bucket is never reduced
  std::string message = error_of<ember::Error>([&] { ddp(x); });
  std::string r = std::to_string(rank());
  EXPECT_EQ(
      message.rfind("Expected to have finished reduction in the prior iteration before starting a new one. "
                    "This error indicates that your module has parameters that were not used in producing loss. "
                    "You can enable unused parameter detection by passing `DDPOptions().find_unused_parameters(true)`",
                    0),
      0u)
      << message;
  EXPECT_NE(message.find("\nParameter indices which did not receive grad for rank " + r + ": 2 3\n"), std::string::npos)
      << message;
  EXPECT_NE(message.find("\nParameters which did not receive grad for rank " + r + ": b.weight, b.bias"),
            std::string::npos)
      << message;
  {
    ember::NoGradGuard no_grad;  // evaluation does not reduce: no error
    EXPECT_EQ(ddp(x).sizes(), (ember::IntList{kSlice, 4}));
  }
}

TEST_P(DDP, FindUnusedParametersReducesWithoutThemAndLeavesGloballyUnusedGradsAlone) {
  ember::manual_seed(60);
  auto net = std::make_shared<TwoHeads>();
  net->to(device());
  DistributedDataParallel ddp(net, DDPOptions().find_unused_parameters(true));
  ember::manual_seed(60);
  auto reference = std::make_shared<TwoHeads>();
  reference->to(device());
  auto [x, y] = batch(8, 4, 61);
  x = x.to(device()), y = y.to(device());
  // Iteration 1: b unused everywhere: a's gradients averaged, b's stay undefined.
  nn::functional::mse_loss(ddp(slice_of(x, rank())), slice_of(y, rank())).backward();
  nn::functional::mse_loss(reference->forward(x), y).backward();
  expect_grads_close({net->a->weight, net->a->bias}, {reference->a->weight, reference->a->bias}, "a");
  EXPECT_FALSE(net->b->weight.grad().defined());
  EXPECT_FALSE(net->b->bias.grad().defined());

  // Iteration 2: only rank 0 uses b; the other ranks contribute zeros to its average.
  ddp.zero_grad();
  net->use_b = rank() == 0;
  nn::functional::mse_loss(ddp(slice_of(x, rank())), slice_of(y, rank())).backward();
  reference->zero_grad();
  reference->use_b = true;
  nn::functional::mse_loss(reference->forward(slice_of(x, 0)), slice_of(y, 0)).backward();
  for (auto [got, want] :
       {std::pair{net->b->weight, reference->b->weight}, std::pair{net->b->bias, reference->b->bias}}) {
    ASSERT_TRUE(got.grad().defined());
    EXPECT_TRUE(got.grad().cpu().allclose(want.grad().cpu() / static_cast<double>(world()), 1e-4, 1e-5));
  }
}

struct WithBatchNorm : nn::Module {
  WithBatchNorm() {
    fc = register_module("fc", std::make_shared<nn::Linear>(4, 3));
    bn = register_module("bn", std::make_shared<nn::BatchNorm1d>(3));
  }
  Tensor forward(const Tensor& x) override { return bn->forward(fc->forward(x)); }
  std::shared_ptr<nn::Linear> fc;
  std::shared_ptr<nn::BatchNorm1d> bn;
};

TEST_P(DDP, BuffersComeFromRankZeroAtConstructionAndEveryForwardWhenBroadcast) {
  for (bool broadcast : {true, false}) {
    auto net = std::make_shared<WithBatchNorm>();
    net->bn->running_mean.fill_(rank() + 1.0);
    net->to(device());
    DistributedDataParallel ddp(net, DDPOptions().broadcast_buffers(broadcast));
    EXPECT_EQ(same_on_every_rank(net->bn->running_mean), broadcast);
    EXPECT_TRUE(same_on_every_rank(net->fc->weight));
    // Training updates the running stats from each rank's own data: they differ...
    Tensor x = (ember::randn({kSlice, 4}) + static_cast<double>(rank())).to(device());
    ddp(x).sum().backward();
    EXPECT_FALSE(same_on_every_rank(net->bn->running_mean));
    // ...until the next forward broadcasts rank 0's (evaluation does not change them).
    ddp.eval();
    {
      ember::NoGradGuard no_grad;
      ddp(x);
    }
    EXPECT_EQ(same_on_every_rank(net->bn->running_mean), broadcast) << "broadcast_buffers " << broadcast;
    EXPECT_EQ(same_on_every_rank(net->bn->num_batches_tracked), true);
  }
}

TEST_P(DDP, DifferentModelsAreAnErrorNamingTheParameterOnEveryRank) {
  auto shapes = mlp({4, rank() == 1 ? 5 : 3, 2}, 1);
  shapes->to(device());
  EXPECT_EQ(error_of<ember::ValueError>([&] { DistributedDataParallel ddp(shapes); }),
            "DDP expects same model across all ranks, but params[0] (0.weight) in process 1 with sizes [5, 4] appears "
            "not to match sizes of the same param in process 0 ([3, 4]).");
  auto counts = mlp(rank() == 1 ? std::vector<int64_t>{4, 3, 2, 2} : std::vector<int64_t>{4, 3, 2}, 1);
  counts->to(device());
  std::string message = error_of<ember::ValueError>([&] { DistributedDataParallel ddp(counts); });
  std::string expected = rank() == 1 ? "DDP expects same model across all ranks, but Rank 1 has 6 params, while rank 0 "
                                       "has inconsistent 4 params."
                                     : "DDP expects same model across all ranks, but Rank " + std::to_string(rank()) +
                                           " has 4 params, while rank 1 has inconsistent 6 params.";
  EXPECT_EQ(message, expected);
  dist::barrier();  // the group is still in step
}

// Mixed precision under DDP (ember::autocast + amp::GradScaler): gradients are averaged
// before the scaler looks at them, so an inf on one rank alone makes every rank skip the
// same step, back off the same scale, and keep the same weights; the next clean step moves
// them all alike.
TEST_P(DDP, GradScalerSkipsTheSameStepOnEveryRankWhenOneRankOverflows) {
  auto net = mlp({8, 4}, 100 + rank());
  net->to(device());
  DistributedDataParallel ddp(net, DDPOptions());
  ember::optim::SGD sgd(ddp.parameters(), ember::optim::SGDOptions(0.1));
  ember::amp::GradScaler scaler(device(), 1024.0, 2.0, 0.5, 1);
  const auto [x, y] = batch(8, 4, 7);
  auto step = [&](bool overflow_here) {
    sgd.zero_grad();
    Tensor loss;
    {
      ember::autocast guard(device().type());  // float16 on cuda, bfloat16 on the cpu
      loss = nn::functional::mse_loss(ddp(slice_of(x, rank()).to(device())), slice_of(y, rank()).to(device()));
    }
    if (overflow_here) loss = loss * std::numeric_limits<float>::infinity();
    scaler.scale(loss).backward();
    const bool stepped = scaler.step(sgd);
    scaler.update();
    return stepped;
  };
  const Tensor before = net->parameters()[0].detach().clone();
  EXPECT_FALSE(step(/*overflow_here=*/rank() == world() - 1));
  EXPECT_EQ(scaler.get_scale(), 512.0);
  EXPECT_TRUE(net->parameters()[0].cpu().equal(before.cpu()));
  EXPECT_TRUE(step(false));
  EXPECT_EQ(scaler.get_scale(), 1024.0);
  EXPECT_FALSE(net->parameters()[0].cpu().equal(before.cpu()));
  for (const Tensor& p : net->parameters()) EXPECT_TRUE(same_on_every_rank(p));
}

INSTANTIATE_TEST_SUITE_P(Devices, DDP, ::testing::Values("cpu", "cuda"));

// The CUDA note's whole-network capture of a DDP step: DDP built on a side stream, warm-up
// steps run eagerly there, then one training step (zero_grad, forward, backward with DDP's
// bucket all_reduces, SGD step) captured whole; the Gloo all_reduces become host-task nodes
// of the graph (Note [Collectives in a captured graph]). Replays with new data leave the
// parameters equal to those of the same steps run eagerly.
TEST(DDPCapture, ReplayedTrainingStepsEqualEagerSteps) {
  const int device = rank();
  const ember::Device dev(ember::kCUDA, device);
  ember::cuda::DeviceGuard device_guard(device);  // the capture stream's device is the current one
  constexpr int kWarmup = 3, kSteps = 4;
  std::vector<Tensor> xs, ys;
  for (int i = 0; i < kWarmup + kSteps; ++i) {
    auto [x, y] = batch(8, 4, 700 + static_cast<uint64_t>(i));
    xs.push_back(slice_of(x, rank()).to(dev));
    ys.push_back(slice_of(y, rank()).to(dev));
  }
  auto train = [&](bool captured) {
    auto net = mlp({8, 16, 4}, 31);
    net->to(dev);
    Tensor static_x = xs[0].clone(), static_y = ys[0].clone();
    ember::cuda::Stream side(device);
    side.wait_stream(ember::cuda::current_stream(device));
    std::shared_ptr<DistributedDataParallel> ddp;
    std::unique_ptr<ember::optim::SGD> optimizer;
    auto step = [&] {
      optimizer->zero_grad(/*set_to_none=*/true);
      nn::functional::mse_loss(ddp->forward(static_x), static_y).backward();
      optimizer->step();
    };
    {
      ember::cuda::StreamGuard guard(side);
      ddp = std::make_shared<DistributedDataParallel>(net);
      optimizer =
          std::make_unique<ember::optim::SGD>(net->parameters(), ember::optim::SGDOptions(0.1).capturable(captured));
      for (int i = 0; i < kWarmup; ++i) {
        static_x.copy_(xs[i]);
        static_y.copy_(ys[i]);
        step();
      }
    }
    ember::cuda::current_stream(device).wait_stream(side);
    ember::cuda::CUDAGraph graph;
    if (captured) {
      ember::cuda::graph capture(graph);
      step();
    }
    for (int i = kWarmup; i < kWarmup + kSteps; ++i) {
      static_x.copy_(xs[i]);
      static_y.copy_(ys[i]);
      if (captured) graph.replay();
      else step();
    }
    ember::cuda::synchronize(device);  // the replays' collectives ran before any later one is issued
    std::vector<Tensor> params;
    for (const Tensor& p : net->parameters()) params.push_back(p.detach().cpu());
    return params;
  };
  std::vector<Tensor> eager = train(false), replayed = train(true);
  ASSERT_EQ(eager.size(), replayed.size());
  for (size_t i = 0; i < eager.size(); ++i)
    EXPECT_TRUE(replayed[i].allclose(eager[i], 1e-5, 1e-6))
        << "parameter " << i << ": largest difference " << (replayed[i] - eager[i]).abs().max().item<float>();
}

}  // namespace

int main(int argc, char** argv) {
  const char* world_size = std::getenv("WORLD_SIZE");
  ember::cuda::emulate(world_size ? std::max(1, std::atoi(world_size)) : 1, size_t{256} << 20);
  // Exact float32 matmuls, so that cuda gradients compare with the same tolerance as cpu ones.
  ember::backends::cuda::matmul.allow_tf32 = false;
  dist::init_process_group("gloo", dist::InitOptions().timeout(std::chrono::seconds(20)));
  ::testing::InitGoogleTest(&argc, argv);
  int status = RUN_ALL_TESTS();
  dist::destroy_process_group();
  return status;
}
